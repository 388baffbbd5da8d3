package bench

import (
	"math/bits"
	"time"
)

// Histogram records durations in log-linear buckets: 64 sub-buckets per
// power of two of microseconds, so a quantile is within about 1.6% of the
// true value. The zero value is empty and ready; it is not safe for
// concurrent use (see [Stats]).
type Histogram struct {
	counts [64 * 40]uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

const subBits = 6 // 64 sub-buckets per power of two

func bucketOf(us uint64) int {
	if us < 1<<subBits {
		return int(us)
	}
	exp := bits.Len64(us) - subBits // >= 1
	sub := us >> (exp - 1) & (1<<subBits - 1)
	b := exp<<subBits + int(sub)
	if b >= len(Histogram{}.counts) {
		return len(Histogram{}.counts) - 1
	}
	return b
}

// bucketLow is the smallest microsecond value falling in bucket b.
func bucketLow(b int) uint64 {
	if b < 1<<subBits {
		return uint64(b)
	}
	exp := b >> subBits
	sub := uint64(b & (1<<subBits - 1))
	return (1<<subBits | sub) << (exp - 1)
}

// Record adds one observation (negative durations count as zero).
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d/time.Microsecond))]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

// Merge adds o's observations to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest observation.
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the average observation (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1): the middle of the bucket
// holding it, never more than Max. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketLow(b), bucketLow(b+1)
			mid := time.Duration((lo+hi)/2) * time.Microsecond
			if b < 1<<subBits {
				mid = time.Duration(lo) * time.Microsecond
			}
			return min(mid, h.max)
		}
	}
	return h.max
}

// Buckets calls fn for each non-empty bucket in ascending order with its
// lower bound and count: the distribution the plot draws.
func (h *Histogram) Buckets(fn func(low time.Duration, count uint64)) {
	for b, c := range h.counts {
		if c > 0 {
			fn(time.Duration(bucketLow(b))*time.Microsecond, c)
		}
	}
}
