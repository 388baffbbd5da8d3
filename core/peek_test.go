package core_test

import (
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// A peek with MaxBytes stops before the message that would go past it,
// and always returns the first; Reserve is asked before each body is
// loaded and ends the peek where it refuses.
func TestPeekBoundedInBytes(t *testing.T) {
	e := coretest.New(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	for range 5 {
		e.MustSend(t, "q", coretest.Text(strings.Repeat("x", 1000)))
	}
	peek := func(opts core.PeekOptions) []*core.Message {
		t.Helper()
		opts.Max = 10
		got, err := e.Broker.Peek(t.Context(), "q", opts)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := peek(core.PeekOptions{MaxBytes: 2500}); len(got) != 2 {
		t.Fatalf("MaxBytes 2500 over messages of 1000 bytes: %d messages, want 2", len(got))
	}
	if got := peek(core.PeekOptions{MaxBytes: 10}); len(got) != 1 {
		t.Fatalf("MaxBytes below one message: %d messages, want the first", len(got))
	}
	reserved, calls := 0, 0
	got := peek(core.PeekOptions{Reserve: func(n int) bool {
		calls++
		if reserved+n > 3500 {
			return false
		}
		reserved += n
		return true
	}})
	sizes := 0
	for _, m := range got {
		sizes += m.Size()
	}
	if len(got) != 3 || calls != 4 || reserved != sizes {
		t.Fatalf("Reserve up to 3500: %d messages, %d calls, %d reserved; want 3, 4, their sizes %d", len(got), calls, reserved, sizes)
	}
	if got := peek(core.PeekOptions{Reserve: func(int) bool { return false }}); len(got) != 0 {
		t.Fatalf("Reserve refusing the first: %d messages", len(got))
	}
}
