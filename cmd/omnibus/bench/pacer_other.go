//go:build !linux

package bench

import "context"

// newSlotWaiter returns the pacer's waiter for ctx: a Go timer.
func newSlotWaiter(ctx context.Context) slotWaiter { return timerWaiter{ctx} }
