package core_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestUpdateKeepsCreationOnlyProperties: what Service Bus fixes when a
// queue or topic is created (sessions, partitioning, duplicate
// detection) cannot be changed by an update, which is refused as a bad
// request and changes nothing; the duplicate detection window can.
func TestUpdateKeepsCreationOnlyProperties(t *testing.T) {
	env := coretest.New(t)
	b := env.Broker
	ctx := t.Context()
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresDuplicateDetection: true})
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	for _, c := range []struct {
		name, path string
		change     func(*core.Entity)
	}{
		{"queue: duplicate detection off", "q", func(e *core.Entity) { e.RequiresDuplicateDetection = false }},
		{"topic: duplicate detection on", "t", func(e *core.Entity) { e.RequiresDuplicateDetection = true }},
		{"queue: sessions on", "q", func(e *core.Entity) { e.RequiresSession = true }},
		{"topic: partitioning on", "t", func(e *core.Entity) { e.EnablePartitioning = true }},
	} {
		before, err := b.GetEntity(c.path)
		if err != nil {
			t.Fatal(err)
		}
		d := *before
		c.change(&d)
		d.DefaultMessageTimeToLive = 42 * time.Minute
		if _, err := b.UpdateEntity(ctx, d); !errors.Is(err, core.ErrBadRequest) {
			t.Errorf("%s: %v, want bad request", c.name, err)
		}
		after, err := b.GetEntity(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(after, before) {
			t.Errorf("%s: the refused update changed the entity: %+v, was %+v", c.name, *after, *before)
		}
	}
	d, err := b.GetEntity("q")
	if err != nil {
		t.Fatal(err)
	}
	d.DuplicateDetectionHistoryTimeWindow = 2 * time.Minute
	if _, err := b.UpdateEntity(ctx, *d); err != nil {
		t.Fatalf("changing the duplicate detection window: %v", err)
	}
	if d, _ = b.GetEntity("q"); d.DuplicateDetectionHistoryTimeWindow != 2*time.Minute || !d.RequiresDuplicateDetection {
		t.Errorf("after the window's update: %+v", *d)
	}
}
