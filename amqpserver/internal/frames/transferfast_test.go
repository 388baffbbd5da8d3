package frames

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// checkTransferFast decodes in, a transfer's list and payload (after its
// descriptor), with the fast path and, if it takes it, with the general
// decoder, and fails t unless both agree. It reports whether the fast
// path took it.
func checkTransferFast(t *testing.T, what string, in []byte) bool {
	t.Helper()
	var fast transferAlloc
	r := buffer.New(in)
	if !fast.t.unmarshalFast(r, &fast.room) {
		if r.Len() != len(in) {
			t.Fatalf("%s: the fast path gave up after consuming %d bytes", what, len(in)-r.Len())
		}
		return false
	}
	if r.Len() != 0 {
		t.Fatalf("%s: the fast path left %d bytes", what, r.Len())
	}
	var general transferAlloc
	if err := general.t.unmarshalInto(buffer.New(in), &general.room); err != nil {
		t.Fatalf("%s: the fast path accepted what the general decoder refuses (%v):\n% x", what, err, in)
	}
	if diff := cmp.Diff(&general.t, &fast.t); diff != "" {
		t.Fatalf("%s: the fast path decoded otherwise (-general +fast):\n%s\n% x", what, diff, in)
	}
	return true
}

// TestTransferFastIsGeneral checks a transfer's fast path against the
// general decoder: transfers of every shape, and every truncation and
// one-byte change of them, that it accepts, the general decoder accepts
// into the same Transfer; and it takes the shapes clients send.
func TestTransferFastIsGeneral(t *testing.T) {
	u := func(v uint32) *uint32 { return &v }
	first, second := ReceiverSettleModeFirst, ReceiverSettleModeSecond
	null := []byte{encoding.TypeCodeNull}
	shapes := []struct {
		name string
		enc  []byte
		fast bool
	}{
		{"a send", transferBody(t, &Transfer{Handle: 1, DeliveryID: u(12345), DeliveryTag: make([]byte, 16), MessageFormat: u(0), Payload: []byte("payload")}), true},
		{"handle 0, no payload", transferBody(t, &Transfer{Handle: 0}), true},
		{"continuation", transferBody(t, &Transfer{Handle: 70000, More: true, Payload: []byte{0}}), true},
		{"every flag", transferBody(t, &Transfer{Handle: 2, DeliveryID: u(1 << 31), DeliveryTag: []byte{}, MessageFormat: u(MessageFormatBatch),
			Settled: true, More: true, RcvSettleMode: &second, Resume: true, Aborted: true, Batchable: true, Payload: []byte("p")}), true},
		{"settle mode first", transferBody(t, &Transfer{Handle: 2, RcvSettleMode: &first}), true},
		{"tag of 32 bytes", transferBody(t, &Transfer{Handle: 1, DeliveryTag: bytes.Repeat([]byte{7}, 32)}), true},
		{"tag of 33 bytes", transferBody(t, &Transfer{Handle: 1, DeliveryTag: bytes.Repeat([]byte{7}, 33)}), true},
		{"list32, bool 0x56, ushort id", append(rawList32([]byte{encoding.TypeCodeUbyte, 3}, []byte{encoding.TypeCodeUshort, 1, 2},
			append([]byte{encoding.TypeCodeVbin32, 0, 0, 0, 1}, 9), []byte{encoding.TypeCodeUint0}, []byte{encoding.TypeCodeBool, 1},
			[]byte{encoding.TypeCodeBool, 0}), "body"...), true},
		{"a state", transferBody(t, &Transfer{Handle: 0, DeliveryID: u(2), Settled: true, State: &TransactionalState{TxnID: []byte{9}, Outcome: &Accepted{}}}), false},
		{"no handle", append([]byte{encoding.TypeCodeList0}, "body"...), false},
		{"null handle", rawList32(null, []byte{encoding.TypeCodeUint0}), false},
		{"field past the spec's", rawList32([]byte{encoding.TypeCodeUint0}, null, null, null, null, null, null, null, null, null, null, []byte{encoding.TypeCodeBoolTrue}), false},
		{"settle mode as uint", rawList32([]byte{encoding.TypeCodeUint0}, null, null, null, null, null, []byte{encoding.TypeCodeSmallUint, 1}), false},
		{"handle as ulong", rawList32([]byte{encoding.TypeCodeSmallUlong, 1}), false},
	}
	subst := []byte{0x00, 0x01, 0x02, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x50, 0x52, 0x53, 0x56, 0x60, 0x70,
		0x80, 0xa0, 0xa1, 0xb0, 0xc0, 0xd0, 0xff}
	var checked int
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			if got := checkTransferFast(t, "as sent", s.enc); got != s.fast {
				t.Fatalf("fast path took it: %v, want %v", got, s.fast)
			}
			for n := range len(s.enc) {
				checkTransferFast(t, "truncated", s.enc[:n])
			}
			changed := make([]byte, len(s.enc))
			for i := range s.enc {
				for _, b := range append(subst, s.enc[i]+1, s.enc[i]-1) {
					copy(changed, s.enc)
					changed[i] = b
					if checkTransferFast(t, "changed", changed) {
						checked++
					}
				}
			}
		})
	}
	t.Logf("%d changed transfers the fast path took compared with the general decoder", checked)
}

// transferBody is tr's list and payload as a frame carries them after
// the transfer's descriptor.
func transferBody(t testing.TB, tr *Transfer) []byte {
	t.Helper()
	var w buffer.Buffer
	if err := tr.MarshalAMQP(&w); err != nil {
		t.Fatal(err)
	}
	r := buffer.New(w.Bytes())
	if _, err := encoding.ReadDescriptor(r); err != nil {
		t.Fatal(err)
	}
	return append(bytes.Clone(r.Bytes()), tr.Payload...)
}

// checkDispositionFast is checkTransferFast for a disposition.
func checkDispositionFast(t *testing.T, what string, in []byte) bool {
	t.Helper()
	var fast dispositionAlloc
	r := buffer.New(in)
	if !fast.d.unmarshalFast(r, &fast.last) {
		if r.Len() != len(in) {
			t.Fatalf("%s: the fast path gave up after consuming %d bytes", what, len(in)-r.Len())
		}
		return false
	}
	if r.Len() != 0 {
		t.Fatalf("%s: the fast path left %d bytes", what, r.Len())
	}
	var general dispositionAlloc
	gr := buffer.New(in)
	err := general.d.unmarshalInto(gr, &general.last)
	if err == nil && gr.Len() != 0 {
		err = fmt.Errorf("%d bytes after the performative", gr.Len()) // as ParseBody's whole
	}
	if err != nil {
		t.Fatalf("%s: the fast path accepted what the general decoder refuses (%v):\n% x", what, err, in)
	}
	if diff := cmp.Diff(&general.d, &fast.d); diff != "" {
		t.Fatalf("%s: the fast path decoded otherwise (-general +fast):\n%s\n% x", what, diff, in)
	}
	return true
}

// TestDispositionFastIsGeneral is TestTransferFastIsGeneral for the
// dispositions a receiver sends.
func TestDispositionFastIsGeneral(t *testing.T) {
	u := func(v uint32) *uint32 { return &v }
	body := func(d *Disposition) []byte {
		var w buffer.Buffer
		if err := d.MarshalAMQP(&w); err != nil {
			t.Fatal(err)
		}
		r := buffer.New(w.Bytes())
		if _, err := encoding.ReadDescriptor(r); err != nil {
			t.Fatal(err)
		}
		return bytes.Clone(r.Bytes())
	}
	null := []byte{encoding.TypeCodeNull}
	accepted8 := []byte{encoding.TypeCodeDescribed, encoding.TypeCodeSmallUlong, byte(codeAccepted), encoding.TypeCodeList8, 1, 0}
	shapes := []struct {
		name string
		enc  []byte
		fast bool
	}{
		{"accepted", body(&Disposition{Role: RoleReceiver, First: 7, Settled: true, State: &Accepted{}}), true},
		{"accepted range", body(&Disposition{Role: RoleReceiver, First: 7, Last: u(70000), Settled: true, State: &Accepted{}, Batchable: true}), true},
		{"released", body(&Disposition{Role: RoleReceiver, First: 1 << 31, State: &Released{}}), true},
		{"no state", body(&Disposition{Role: RoleSender, First: 0, Settled: true}), true},
		{"list32, accepted list8", rawList32([]byte{encoding.TypeCodeBool, 1}, []byte{encoding.TypeCodeUshort, 1, 2}, null,
			[]byte{encoding.TypeCodeBoolTrue}, accepted8), true},
		{"bytes after it", append(body(&Disposition{Role: RoleReceiver, First: 7, State: &Accepted{}}), 0), false},
		{"rejected", body(&Disposition{Role: RoleReceiver, First: 1, State: &Rejected{Error: &Error{Condition: CondNotFound}}}), false},
		{"modified", body(&Disposition{Role: RoleReceiver, First: 1, State: &Modified{DeliveryFailed: true}}), false},
		{"accepted with a field", rawList32([]byte{encoding.TypeCodeBoolTrue}, []byte{encoding.TypeCodeUint0}, null, null,
			[]byte{encoding.TypeCodeDescribed, encoding.TypeCodeSmallUlong, byte(codeAccepted), encoding.TypeCodeList8, 2, 1, encoding.TypeCodeNull}), false},
		{"no first", rawList32([]byte{encoding.TypeCodeBoolTrue}), false},
		{"null role", rawList32(null, []byte{encoding.TypeCodeUint0}), false},
		{"field past the spec's", rawList32([]byte{encoding.TypeCodeBoolTrue}, []byte{encoding.TypeCodeUint0}, null, null, null, null, []byte{encoding.TypeCodeBoolTrue}), false},
	}
	subst := []byte{0x00, 0x01, 0x02, 0x03, 0x24, 0x26, 0x40, 0x41, 0x42, 0x43, 0x45, 0x50, 0x52, 0x53, 0x56, 0x60, 0x70,
		0x80, 0xa0, 0xc0, 0xd0, 0xff}
	var checked int
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			if got := checkDispositionFast(t, "as sent", s.enc); got != s.fast {
				t.Fatalf("fast path took it: %v, want %v", got, s.fast)
			}
			checkDispositionFast(t, "with a byte after it", append(bytes.Clone(s.enc), 0))
			for n := range len(s.enc) {
				checkDispositionFast(t, "truncated", s.enc[:n])
			}
			changed := make([]byte, len(s.enc))
			for i := range s.enc {
				for _, b := range append(subst, s.enc[i]+1, s.enc[i]-1) {
					copy(changed, s.enc)
					changed[i] = b
					if checkDispositionFast(t, "changed", changed) {
						checked++
					}
				}
			}
		})
	}
	t.Logf("%d changed dispositions the fast path took compared with the general decoder", checked)
}
