package cli

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// GC tuning. A broker's live heap is small when its queues are drained
// (a few MB of indexes and buffers) and grows with a backlog. With Go's
// default GOGC of 100 a small heap is collected many times a second under
// load, and on two cores each cycle's marking delays the goroutines that
// carry messages: at 6.5k msg/s send + receive (live heap 2-6 MB), GOGC
// 400 lowered the end-to-end p90 in 7 of 8 paired runs (6.2 -> 4.1 ms,
// 5.3 -> 3.3 ms) and the p99 in most (8.1 -> 5.7 ms; at that tail the
// machine's noise is as large as the effect). A fixed high
// GOGC would multiply a large backlog's heap too, so the percentage is
// derived from the live heap: enough to give it gcHeadroom of room, within
// [100, gcMaxPercent]. Past gcHeadroom of live heap this is GOGC 100.
//
// gcMaxPercent was 400, which gave a drained broker's 3-4 MB only 12-16
// MB of room: at 20k msg/s it collected every 80 ms, and a third of the
// episodes that make the end-to-end p99 at half the maximum rate began
// at a collection (issue 30). At 1600 the 64 MB of room holds down to a
// 4 MB live heap: at 8k msg/s send + receive, 6-7 collections in 8 s
// instead of 38-41, end-to-end p99 lower in 5 of 6 paired runs on a busy
// machine (median 59 against 105 ms), broker CPU per message the same;
// the price is the room itself, about 90 MB more peak RSS under load.
// Idle RSS does not change (nothing allocates), and before the first
// collection has measured the live heap (start-up, recovery of a backlog)
// the percentage stays at gcStartPercent.
const (
	gcHeadroom     = 64 << 20
	gcMaxPercent   = 1600
	gcStartPercent = 400
	gcTuneInterval = 250 * time.Millisecond
)

// gcPercentFor returns the GOGC for a live heap of live bytes, or 0 when
// the heap has not been measured yet (live 0: keep the percentage).
func gcPercentFor(live uint64) int {
	if live == 0 {
		return 0
	}
	p := int(gcHeadroom * 100 / live)
	return max(100, min(gcMaxPercent, p))
}

// StartGCTuning runs tuneGC, honouring GOGC from the environment, until
// the returned stop is called. Both the broker and the load generator use
// it: the load generator's live heap is small too, and every cycle it
// saves leaves CPU to the broker it shares the machine with (unsettled
// send, 3 paired runs: client CPU -10 %, +6 to +12 % msg/s).
func StartGCTuning() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	_, envSet := os.LookupEnv("GOGC")
	go tuneGC(ctx, envSet)
	return cancel
}

// tuneGC adjusts GOGC to the live heap until ctx ends, then restores
// the percentage it found. A GOGC set in the environment is respected:
// tuneGC then does nothing.
func tuneGC(ctx context.Context, envSet bool) {
	if envSet {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	prev := debug.SetGCPercent(gcStartPercent)
	defer debug.SetGCPercent(prev)
	cur := gcStartPercent
	t := time.NewTicker(gcTuneInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if p := gcPercentFor(sample[0].Value.Uint64()); p != 0 && p != cur {
			debug.SetGCPercent(p)
			cur = p
		}
	}
}
