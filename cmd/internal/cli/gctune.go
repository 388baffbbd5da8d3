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
const (
	gcHeadroom     = 64 << 20
	gcMaxPercent   = 400
	gcTuneInterval = 250 * time.Millisecond
)

// gcPercentFor returns the GOGC for a live heap of live bytes.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return gcMaxPercent
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
	prev := debug.SetGCPercent(gcMaxPercent)
	defer debug.SetGCPercent(prev)
	cur := gcMaxPercent
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
		if p := gcPercentFor(sample[0].Value.Uint64()); p != cur {
			debug.SetGCPercent(p)
			cur = p
		}
	}
}
