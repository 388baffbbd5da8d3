package bench

import (
	"testing"
	"time"
)

func TestBucketsAreMonotoneAndCover(t *testing.T) {
	prev := -1
	for _, us := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 1e6, 1e9} {
		b := bucketOf(us)
		if b < prev {
			t.Errorf("bucketOf(%d) = %d, below the previous %d", us, b, prev)
		}
		prev = b
		if lo, hi := bucketLow(b), bucketLow(b+1); us < lo || us >= hi {
			t.Errorf("%d µs falls in bucket %d = [%d, %d)", us, b, lo, hi)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {1, time.Second}} {
		got := h.Quantile(c.q)
		if diff := (got - c.want).Seconds() / c.want.Seconds(); diff > 0.02 || diff < -0.02 {
			t.Errorf("Quantile(%v) = %v, want %v ±2%%", c.q, got, c.want)
		}
	}
	if h.Count() != 1000 || h.Max() != time.Second {
		t.Errorf("Count %d Max %v, want 1000 and 1s", h.Count(), h.Max())
	}
	if m := h.Mean(); m < 500*time.Millisecond || m > 501*time.Millisecond {
		t.Errorf("Mean = %v, want 500.5ms", m)
	}
}

func TestHistogramMergeAndEmpty(t *testing.T) {
	var a, b Histogram
	if a.Quantile(0.5) != 0 || a.Mean() != 0 {
		t.Errorf("empty histogram has nonzero quantile or mean")
	}
	a.Record(10 * time.Microsecond)
	b.Record(-time.Second) // counts as zero
	b.Record(20 * time.Microsecond)
	a.Merge(&b)
	if a.Count() != 3 || a.Quantile(0) != 0 || a.Quantile(1) != 20*time.Microsecond {
		t.Errorf("merged: count %d, min %v, max %v", a.Count(), a.Quantile(0), a.Quantile(1))
	}
	var total uint64
	a.Buckets(func(_ time.Duration, c uint64) { total += c })
	if total != 3 {
		t.Errorf("Buckets total %d, want 3", total)
	}
}
