package txnwire

import (
	"reflect"
	"strings"
	"testing"
)

// Values survive encoding and decoding, in both widths of each
// variable-size type.
func TestCodecRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, v := range []any{
		nil, true, false, uint8(7), uint16(513), uint32(5), uint32(70000), uint64(9), uint64(1 << 40),
		int32(-3), int64(-1 << 40), "short", long, amqpSymbol("sym"), []byte("bin"), []byte(long),
		[]any{"a", uint32(1), []any{nil}},
		amqpMap{{amqpSymbol("k"), "v"}, {"n", uint64(2)}},
		described(dTxnState, []byte("txn:1"), described(dAccepted)),
	} {
		b := appendAMQP(nil, v)
		got, rest, err := decodeAMQP(append(b, 0xee))
		if err != nil || len(rest) != 1 || !reflect.DeepEqual(got, v) {
			t.Errorf("%#v: decoded %#v (rest %x, %v)", v, got, rest, err)
		}
	}
}

// Truncated input is an error, never a panic.
func TestCodecTruncated(t *testing.T) {
	b := appendAMQP(nil, described(dDischarge, []byte("txn:1"), true, amqpMap{{"k", "v"}}))
	for n := range len(b) {
		if _, _, err := decodeAMQP(b[:n]); err == nil {
			t.Errorf("%d of %d bytes decoded without error", n, len(b))
		}
	}
}
