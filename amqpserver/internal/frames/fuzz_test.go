package frames

import (
	"bytes"
	"encoding/binary"
	"errors"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"runtime"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// fuzzSlack is what a fuzzed decode may allocate beyond AllocFactor bytes
// per input byte: the Reader's 4 KiB read buffer, a performative struct,
// an error message, and up to 8 KiB that Go adds when it rounds a body
// above 32 KiB up to whole pages.
const fuzzSlack = 16384

// checkBudget runs f, which decodes n bytes, and fails t if it allocated
// more than factor bytes per byte plus fuzzSlack. f must do the same
// work each time it is called: an allocation by another goroutine of the
// fuzzing engine can land inside a measurement, so one over the limit is
// repeated, and only a decode over it three times in a row fails.
func checkBudget(t *testing.T, what string, factor, n int, f func()) {
	if raceEnabled {
		f() // see race_on_test.go
		return
	}
	limit := uint64(factor*n + fuzzSlack)
	var got uint64
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		if got = after.TotalAlloc - before.TotalAlloc; got <= limit {
			return
		}
	}
	t.Fatalf("%s of %d bytes allocated %d bytes, more than the budget of %d", what, n, got, limit)
}

// seedBodies holds every performative and SASL frame, with the optional
// parts the Azure SDKs send.
func seedBodies() []Body {
	u := func(v uint32) *uint32 { return &v }
	second, settled := ReceiverSettleModeSecond, SenderSettleModeSettled
	cause := &Error{Condition: CondNotFound, Description: "no such entity",
		Info: encoding.Map{{Key: encoding.Symbol("com.microsoft:tracking-id"), Value: "t"}}}
	return []Body{
		&Open{ContainerID: "c", Hostname: "h", MaxFrameSize: 65536, ChannelMax: 4999, IdleTimeOut: 60000,
			OfferedCapabilities: []encoding.Symbol{"x"}, DesiredCapabilities: []encoding.Symbol{"com.microsoft:session-filter"},
			Properties: encoding.Map{{Key: encoding.Symbol("product"), Value: "MSGolangClient"}}},
		&Begin{RemoteChannel: ptr(uint16(0)), NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 255,
			Properties: encoding.Map{{Key: encoding.Symbol("k"), Value: int64(1)}}},
		&Attach{Name: "l", Handle: 1, Role: RoleReceiver, RcvSettleMode: &second, Source: &Source{Address: "q", Filter: encoding.Map{
			{Key: encoding.Symbol("f"), Value: encoding.Described{Descriptor: uint64(0x137000000C), Value: "s"}}},
			DefaultOutcome: &Modified{DeliveryFailed: true}, Outcomes: []encoding.Symbol{"amqp:accepted:list"}},
			Target: &Target{Address: "r"}, Properties: encoding.Map{{Key: encoding.Symbol("com.microsoft:timeout"), Value: uint32(60000)}}},
		&Attach{Name: "s", Handle: 2, Role: RoleSender, SndSettleMode: &settled, Target: &Target{Address: "q", Capabilities: []encoding.Symbol{"c"}},
			Unsettled: encoding.Map{{Key: []byte{1}, Value: &Accepted{}}}, InitialDeliveryCount: u(0), MaxMessageSize: 1 << 20},
		&Attach{Name: "txn", Handle: 3, Role: RoleSender, Coordinator: &Coordinator{Capabilities: []encoding.Symbol{"amqp:local-transactions"}}, InitialDeliveryCount: u(0)},
		&Flow{NextIncomingID: u(1), IncomingWindow: 10, NextOutgoingID: 1, OutgoingWindow: 10, Handle: u(0), DeliveryCount: u(0), LinkCredit: u(100), Drain: true, Echo: true},
		&Transfer{Handle: 0, DeliveryID: u(1), DeliveryTag: []byte{1}, MessageFormat: u(MessageFormatBatch), More: true, Payload: []byte("p")},
		&Transfer{Handle: 0, DeliveryID: u(2), DeliveryTag: []byte{2}, Settled: true, State: &TransactionalState{TxnID: []byte{9}, Outcome: &Accepted{}}},
		&Disposition{Role: RoleReceiver, First: 1, Last: u(5), Settled: true, State: &Modified{UndeliverableHere: true,
			MessageAnnotations: encoding.Map{{Key: encoding.Symbol("x-opt-reason"), Value: "r"}}}},
		&Disposition{Role: RoleReceiver, First: 1, State: &Rejected{Error: cause}},
		&Disposition{Role: RoleSender, First: 1, State: &Received{SectionNumber: 1, SectionOffset: 2}},
		&Disposition{Role: RoleReceiver, First: 1, State: &Released{}},
		&Disposition{Role: RoleSender, First: 1, State: &Declared{TxnID: []byte{1, 2}}},
		&Detach{Handle: 1, Closed: true, Error: cause},
		&End{Error: cause},
		&Close{Error: cause},
		&SASLMechanisms{Mechanisms: []encoding.Symbol{"PLAIN", "ANONYMOUS"}},
		&SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00a\x00b"), Hostname: "h"},
		&SASLChallenge{Challenge: []byte("c")},
		&SASLResponse{Response: []byte("r")},
		&SASLOutcome{Code: SASLOK, AdditionalData: []byte("d")},
	}
}

// FuzzFrame feeds arbitrary bytes to a Reader. Decoding must never panic,
// must stay within the allocation budget (encoding.AllocFactor bytes per
// input byte), and any frame it accepts must re-encode to bytes that
// decode to an identical encoding. The transfer's and the disposition's
// fast paths must agree with the general decoder on whatever they take.
func FuzzFrame(f *testing.F) {
	for _, b := range seedBodies() {
		var w buffer.Buffer
		if err := Write(&w, Frame{Body: b}); err != nil {
			f.Fatal(err)
		}
		f.Add(w.Bytes())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var got []Frame
		// A frame cut short by the end of the input was allocated (up to
		// eagerBody) for bytes that never came: budget them too.
		checkBudget(t, "reading frames", encoding.AllocFactor, len(in)+unreceived(in, fuzzMaxFrame)/encoding.AllocFactor, func() {
			got = got[:0]
			r := NewReader(bytes.NewReader(in), fuzzMaxFrame)
			for {
				fr, err := r.ReadFrame()
				if err != nil {
					return
				}
				got = append(got, fr)
			}
		})
		// Whatever follows a transfer's or a disposition's descriptor
		// anywhere in the input, their fast paths take only as the
		// general decoder does.
		for i := 0; i+3 <= len(in); i++ {
			if in[i] == encoding.TypeCodeDescribed && in[i+1] == encoding.TypeCodeSmallUlong {
				switch in[i+2] {
				case byte(codeTransfer):
					checkTransferFast(t, "after a transfer descriptor", in[i+3:])
				case byte(codeDisposition):
					checkDispositionFast(t, "after a disposition descriptor", in[i+3:])
				}
			}
		}
		for _, fr := range got {
			var w buffer.Buffer
			if err := Write(&w, fr); err != nil {
				t.Fatalf("re-encoding %#v: %v", fr, err)
			}
			again, err := ParseFrame(w.Bytes())
			if err != nil {
				t.Fatalf("decoding re-encoded % x: %v", w.Bytes(), err)
			}
			var w2 buffer.Buffer
			if err := Write(&w2, again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.Bytes(), w2.Bytes()) {
				t.Fatalf("encoding not stable:\n% x\n% x", w.Bytes(), w2.Bytes())
			}
		}
	})
}

// fuzzMaxFrame is the Reader's limit in FuzzFrame: above eagerBody, so
// that bodies that grow as they arrive are fuzzed too.
const fuzzMaxFrame = 1 << 20

// unreceived returns how many bytes the Reader allocates for the last
// frame of in beyond those in the input, when in ends inside a frame.
func unreceived(in []byte, maxFrame uint32) int {
	for len(in) >= HeaderSize {
		size := binary.BigEndian.Uint32(in)
		if size < HeaderSize || size > maxFrame {
			return 0
		}
		if int(size) > len(in) {
			return max(0, min(int(size)-HeaderSize, eagerBody)-(len(in)-HeaderSize))
		}
		in = in[size:]
	}
	return 0
}

// FuzzMessage decodes arbitrary bytes as a message, both as a request
// ($cbs, $management: every section decoded) and as the broker stores it
// (bodies validated, not decoded), then splits it as a batch. None of it
// may panic or break the allocation budget; both decodes must agree on
// what they accept, and an accepted message must re-encode stably with its
// body verbatim.
func FuzzMessage(f *testing.F) {
	f.Add(mustMarshalMessage(f, fullMessage()))
	f.Add(mustMarshalMessage(f, &Message{BodyKind: BodyValue, Value: []any{"x", int64(1)}}))
	f.Add(mustMarshalMessage(f, &Message{BodyKind: BodySequence, Sequence: [][]any{{true}}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		var m, stored *Message
		var err, storedErr error
		// Two measurements (ReadMemStats stops the world, so each costs
		// tens of microseconds): the full decode, then the broker's with
		// the batch split, whose inner messages' values have their own
		// budget and whose structures may take BatchFactor per byte.
		checkBudget(t, "UnmarshalMessage", encoding.AllocFactor, len(in), func() { m, err = UnmarshalMessage(in) })
		checkBudget(t, "UnmarshalMessageSharing and SplitBatch", 2*encoding.AllocFactor+BatchFactor, len(in), func() {
			stored, storedErr = UnmarshalMessageSharing(in)
			if storedErr == nil {
				// The broker decodes the application properties apart.
				storedErr = stored.DecodeApplicationProperties(&mapSink{})
			}
			if stored != nil && stored.BodyKind == BodyData {
				_, _ = SplitBatch(stored)
			}
		})
		// A StoreDecoder decodes as UnmarshalMessageSharing does.
		var sd StoreDecoder
		reused, reusedErr := sd.Decode(in)
		reused2, reusedErr2 := sd.Decode(in) // the second time into the room the first used
		if stored0, err0 := UnmarshalMessageSharing(in); (err0 == nil) != (reusedErr == nil) || (err0 == nil) != (reusedErr2 == nil) {
			t.Fatalf("UnmarshalMessageSharing said %v, StoreDecoder %v then %v", err0, reusedErr, reusedErr2)
		} else if err0 == nil {
			if d := cmp.Diff(stored0, reused, cmpopts.EquateEmpty(), cmpopts.EquateNaNs()); d != "" {
				t.Fatalf("StoreDecoder's message differs (-sharing +decoder):\n%s", d)
			}
			_ = reused2
		}
		if storedErr != nil && err == nil {
			t.Fatalf("UnmarshalMessageSharing refused what UnmarshalMessage accepted: %v", storedErr)
		}
		if err != nil && storedErr == nil && !errors.Is(err, encoding.ErrBudget) {
			t.Fatalf("UnmarshalMessageSharing accepted what UnmarshalMessage refused: %v", err)
		}
		if err != nil {
			return
		}
		var w buffer.Buffer
		if err := m.MarshalAMQP(&w); err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		if m.RawBody != nil && !bytes.Contains(w.Bytes(), m.RawBody) {
			t.Fatalf("re-encoded message lacks the raw body")
		}
		m2, err := UnmarshalMessage(w.Bytes())
		if err != nil {
			t.Fatalf("decoding re-encoded % x: %v", w.Bytes(), err)
		}
		var w2 buffer.Buffer
		if err := m2.MarshalAMQP(&w2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Bytes(), w2.Bytes()) {
			t.Fatalf("encoding not stable")
		}
		// Written with its body apart, it is the same bytes.
		var w3 buffer.Buffer
		apart, err := m.MarshalBodyApart(&w3)
		if err != nil {
			t.Fatalf("MarshalBodyApart: %v", err)
		}
		if got := append(w3.Bytes(), apart...); !bytes.Equal(got, w.Bytes()) {
			t.Fatalf("MarshalBodyApart wrote % x + % x, MarshalAMQP % x", w3.Bytes(), apart, w.Bytes())
		}
	})
}

// mapSink collects what DecodeApplicationProperties decodes, string keys
// and others alike, as a Map.
type mapSink struct{ m encoding.Map }

func (s *mapSink) Len(n int)                 { s.m = make(encoding.Map, 0, n) }
func (s *mapSink) StringKey(p []byte) string { return string(p) }
func (s *mapSink) Put(k string, v any) error { return s.PutOther(k, v) }
func (s *mapSink) PutOther(k, v any) error {
	s.m = append(s.m, encoding.KeyValue{Key: k, Value: v})
	return nil
}
