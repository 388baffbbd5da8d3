package coretest

import (
	"context"
	"testing"
	"time"
)

// Now returns a context whose deadline has already passed, derived from
// t.Context(). A Receive or AcceptSession given it takes what is available
// at once and never blocks, which is how tests on a fake clock ask "what
// is there now" without waiting on real time.
func Now(t testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0))
	t.Cleanup(cancel)
	return ctx
}
