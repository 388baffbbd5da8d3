package cli

import "testing"

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 0},          // not measured yet: keep the percentage
		{1 << 20, 1600}, // the most room: a collection every 16 MiB allocated at least
		{4 << 20, 1600}, // a drained broker: 64 MiB of room is 1600 %
		{16 << 20, 400},
		{32 << 20, 200},
		{64 << 20, 100},
		{1 << 30, 100}, // a large backlog: Go's default, heap at most twice the live size
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}
