package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/storage"
)

// A body record cut short at any length, or with any byte changed, decodes
// to an error or to some message: never a panic, so nothing that reads
// bodies (receives, the read-ahead) can be brought down by a damaged file.
func TestDecodeBodyNeverPanicsOnDamage(t *testing.T) {
	m := recordTestMessage()
	m.ApplicationProperties["list"] = []any{int64(1), "two", []any{3.0, map[string]any{"k": UUID{1}}}}
	v, err := encodeBody(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(v); n++ {
		if _, err := decodeBody(v[:n]); !errors.Is(err, errCorrupt) {
			t.Fatalf("body cut to %d of %d bytes: %v, want errCorrupt", n, len(v), err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		g := append([]byte(nil), v...)
		for range 1 + rng.IntN(4) {
			g[rng.IntN(len(g))] = byte(rng.IntN(256))
		}
		_, _ = decodeBody(g) // must return
	}
	// Lists nested without end, as garbage can spell them, are refused
	// before they recurse deep; so is such a value at send.
	var deep []byte
	for range 100000 {
		deep = append(deep, tagList, 1)
	}
	r := reader{b: deep}
	if r.value(); !errors.Is(r.err, errCorrupt) {
		t.Errorf("a value nested 100000 deep: %v, want errCorrupt", r.err)
	}
	var v0 any = int64(1)
	for range maxValueDepth + 1 {
		v0 = []any{v0}
	}
	if _, err := encodeBody(nil, &Message{ApplicationProperties: map[string]any{"k": v0}}); CodeOf(err) != CodeBadRequest {
		t.Errorf("sending a value nested %d deep: %v, want bad request", maxValueDepth+1, err)
	}
}

// The reference protocol of shared bodies, step by step: the body goes
// with the last copy exactly once, whatever order concurrent writes
// finish in and whichever of them fail.
func TestSharedBodyReleases(t *testing.T) {
	const seq = 7
	// Two copies, two releases in flight; every finishing order and
	// outcome. want: whether the body ends deleted, and how many
	// references are left.
	for _, tc := range []struct {
		name      string
		order     []int // which release ends first (0 or 1)
		committed [2]bool
		deleted   bool
		left      int32
	}{
		{"both commit, first first", []int{0, 1}, [2]bool{true, true}, true, 0},
		{"both commit, second first", []int{1, 0}, [2]bool{true, true}, true, 0},
		{"first fails after second commits", []int{1, 0}, [2]bool{false, true}, false, 1},
		{"second fails after first commits", []int{0, 1}, [2]bool{true, false}, false, 1},
		{"both fail", []int{0, 1}, [2]bool{false, false}, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &entity{id: 1}
			e.addRefs([]placement{{r: &msgRec{seq: seq, stateRec: stateRec{owner: 1}}}, {r: &msgRec{seq: seq, stateRec: stateRec{owner: 1}}}})
			var inBatch [2]bool
			inBatch[0] = e.beginRelease(seq, 0)
			inBatch[1] = e.beginRelease(seq, 0)
			if inBatch[0] || inBatch[1] {
				t.Fatalf("a body was deleted in a batch while another release was in flight: %v", inBatch)
			}
			deletions := 0
			for _, i := range tc.order {
				bodyGone := tc.committed[i] && inBatch[i]
				if e.endRelease(seq, tc.committed[i], bodyGone) {
					deletions++
				}
				if bodyGone {
					deletions++
				}
			}
			if got := deletions == 1; got != tc.deleted || deletions > 1 {
				t.Errorf("body deleted %d times, want deleted=%v", deletions, tc.deleted)
			}
			if n := e.refs.m[seq].n; n != tc.left {
				t.Errorf("%d references left, want %d", n, tc.left)
			}
		})
	}
	// One release alone deletes in its own batch; two of the same write
	// do too.
	e := &entity{id: 1}
	e.addRefs([]placement{{r: &msgRec{seq: seq, stateRec: stateRec{owner: 1}}}, {r: &msgRec{seq: seq, stateRec: stateRec{owner: 1}}}})
	if e.beginRelease(seq, 0) || !e.beginRelease(seq, 1) {
		t.Error("the write releasing both copies does not delete the body")
	}
	if e.endRelease(seq, true, true) || e.endRelease(seq, true, true) || len(e.refs.m) != 0 {
		t.Errorf("after the write: %v", e.refs.m)
	}
}

// The store's faults become the core's codes, keeping the cause.
func TestStoreErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code Code
	}{
		{fmt.Errorf("disk: %w", storage.ErrNoSpace), CodeServerBusy},
		{fmt.Errorf("disk: %w", storage.ErrUnavailable), CodeServerBusy},
		{fmt.Errorf("disk: %w: %w", storage.ErrUnavailable, storage.ErrOutcomeUnknown), CodeOutcomeUnknown},
		{fmt.Errorf("disk: %w", storage.ErrCorrupt), CodeInternal},
		{errors.New("something else"), CodeInternal},
		{ErrLockLost, CodeLockLost},
	} {
		got := storeError(tc.err)
		if CodeOf(got) != tc.code || !errors.Is(got, tc.err) {
			t.Errorf("storeError(%v) = %v (code %v), want code %v wrapping it", tc.err, got, CodeOf(got), tc.code)
		}
	}
	if storeError(nil) != nil {
		t.Error("storeError(nil) is not nil")
	}
}

// A disk that refuses every write does not flood the log: each kind of
// storage warning is logged at most once per warnInterval, with a count.
func TestStorageWarningsAreThrottled(t *testing.T) {
	obs, logs := observer.New(zap.WarnLevel)
	clk := clock.NewFake(time.Unix(1e9, 0))
	b := &Broker{clk: clk, log: zap.New(obs)}
	for range 100 {
		b.warnStorage("recording delivery counts failed")
	}
	b.warnStorage("another kind")
	clk.Advance(warnInterval)
	b.warnStorage("recording delivery counts failed")
	got := logs.FilterMessage("recording delivery counts failed").All()
	if len(got) != 2 || got[0].ContextMap()["times"] != int64(1) || got[1].ContextMap()["times"] != int64(100) {
		t.Fatalf("logged %d times: %v", len(got), got)
	}
	if logs.FilterMessage("another kind").Len() != 1 {
		t.Error("a different warning was throttled with the first")
	}
}
