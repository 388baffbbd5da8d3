package cli

import "testing"

func TestProcsFor(t *testing.T) {
	for _, tc := range []struct {
		cores  float64
		envSet bool
		want   int
	}{
		{0, false, 0},    // no limit
		{0.2, false, 1},  // below one core
		{0.99, false, 1}, // still below
		{1, false, 0},    // one core: the runtime's two stand
		{1.5, false, 0},
		{0.5, true, 0}, // GOMAXPROCS in the environment wins
	} {
		if got := procsFor(tc.cores, tc.envSet); got != tc.want {
			t.Errorf("procsFor(%v, %v) = %d, want %d", tc.cores, tc.envSet, got, tc.want)
		}
	}
}
