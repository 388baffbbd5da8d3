package frames

import (
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// cmpOpts compares decoded frames: times by instant, and nil and empty
// slices as different (the codec preserves the distinction).
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmpopts.EquateComparable(encoding.UUID{}),
}

func ptr[T any](v T) *T { return &v }

// mustWrite encodes f into a fresh buffer.
func mustWrite(t testing.TB, f Frame) []byte {
	t.Helper()
	var w buffer.Buffer
	if err := Write(&w, f); err != nil {
		t.Fatalf("Write(%#v): %v", f, err)
	}
	return w.Bytes()
}

// mustMarshalMessage encodes m into a fresh slice.
func mustMarshalMessage(t testing.TB, m *Message) []byte {
	t.Helper()
	var w buffer.Buffer
	if err := m.MarshalAMQP(&w); err != nil {
		t.Fatalf("MarshalAMQP: %v", err)
	}
	return w.Bytes()
}

// allocSlack is what a decode may allocate beyond AllocFactor bytes per
// input byte in these tests: the performative's struct, an error message.
const allocSlack = 4096

// bytesAllocated returns the bytes f allocates per call, averaged over
// runs calls.
func bytesAllocated(runs int, f func()) uint64 {
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}
