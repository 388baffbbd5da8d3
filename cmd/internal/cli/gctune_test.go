package cli

import "testing"

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 400},
		{4 << 20, 400},  // a drained broker: the most room
		{16 << 20, 400}, // 64 MiB of room is 400 %
		{32 << 20, 200},
		{64 << 20, 100},
		{1 << 30, 100}, // a large backlog: Go's default, heap at most twice the live size
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}
