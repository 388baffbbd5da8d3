package core

import (
	"math"
	"testing"
)

// An entity's maximum is its MaxSizeInMegabytes in bytes or
// Limits.MaxEntityBytes, whichever is smaller; a size stored before its
// range was checked saturates instead of wrapping negative (which refused
// every send).
func TestMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		mb, limit, want int64
	}{
		{1024, 0, 1 << 30},
		{81920, 0, 80 << 30},
		{1024, 1 << 20, 1 << 20},
		{1024, 2 << 30, 1 << 30},
		{math.MaxInt64, 0, math.MaxInt64},
		{math.MaxInt64 >> 20, 0, math.MaxInt64 >> 20 << 20},
		{math.MaxInt64>>20 + 1, 0, math.MaxInt64},
		{math.MaxInt64, 1 << 20, 1 << 20},
	} {
		b := &Broker{}
		b.SetQuotas(0, tc.limit) // as New does with Config.Limits
		if got := b.maxBytes(&Entity{MaxSizeInMegabytes: tc.mb}); got != tc.want {
			t.Errorf("MaxSizeInMegabytes %d, MaxEntityBytes %d: maxBytes = %d, want %d", tc.mb, tc.limit, got, tc.want)
		}
	}
}
