package conformance

import (
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Temporary entities: seed 003 ("AutoDeleteOnIdle"). Its minimum is five
// minutes, so the deletion itself only runs with --slow (Slow).

func init() {
	register(
		Scenario{Name: "autodelete-property-roundtrip", Seed: "003 AutoDeleteOnIdle is set on an entity and read back through management", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-autodelete")
			got, err := t.target.admin.GetQueue(t.ctx, q, nil)
			t.must(err, "get queue")
			if got == nil || got.AutoDeleteOnIdle == nil || *got.AutoDeleteOnIdle != "PT5M" {
				t.Fatalf("AutoDeleteOnIdle = %v, want PT5M", got)
			}
		}},
		Scenario{Name: "autodelete-minimum-5-minutes", Seed: "003 the minimum AutoDeleteOnIdle is 5 minutes: a shorter value is refused", Protocol: REST, Run: func(t *T) {
			if t.target.Predeclared {
				t.Skipf("needs runtime management")
			}
			t.live()
			name := "cf-autodelete-short-" + suffix()
			_, err := t.target.admin.CreateQueue(t.ctx, name, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{AutoDeleteOnIdle: to.Ptr("PT1M")}})
			if err == nil {
				_, _ = t.target.admin.DeleteQueue(t.ctx, name, nil)
				t.Fatalf("a queue with AutoDeleteOnIdle PT1M was created")
			}
			var re *azcore.ResponseError
			if errors.As(err, &re) && re.StatusCode != 400 {
				t.Errorf("refused with HTTP %d, want 400", re.StatusCode)
			}
		}},
		Scenario{Name: "autodelete-deletes-idle-queue", Seed: "003 an entity idle for AutoDeleteOnIdle is deleted automatically", Protocol: AMQP, Budget: 9 * time.Minute, Slow: true, Run: func(t *T) {
			q := t.Queue("cf-autodelete")
			t.Send(q, Text("kept while idle"))
			start := time.Now()
			deadline := start.Add(8 * time.Minute)
			for time.Now().Before(deadline) {
				wait(t, 15*time.Second)
				got, err := t.target.admin.GetQueue(t.ctx, q, nil)
				t.must(err, "get queue")
				if got == nil {
					if time.Since(start) < 5*time.Minute-5*time.Second {
						t.Errorf("deleted after less than 5 minutes of idleness")
					}
					return
				}
			}
			t.Fatalf("queue %s still exists 8 minutes after its last use", q)
		}},
	)
}
