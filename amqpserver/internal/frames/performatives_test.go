package frames

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

func TestPerformativeRoundTrip(t *testing.T) {
	caps := []encoding.Symbol{"com.microsoft:session-filter", "x"}
	props := encoding.Map{{Key: encoding.Symbol("product"), Value: "MSGolangClient"}}
	amqpErr := &Error{Condition: CondNotFound, Description: "no such entity", Info: encoding.Map{{Key: encoding.Symbol("k"), Value: int32(1)}}}
	tests := []struct {
		name string
		body Body
	}{
		{"open minimal", &Open{ContainerID: "c", MaxFrameSize: 0xffffffff, ChannelMax: 0xffff}},
		{"open full", &Open{
			ContainerID: "container", Hostname: "localhost", MaxFrameSize: 65536, ChannelMax: 4999,
			IdleTimeOut: 30000, OutgoingLocales: []encoding.Symbol{"en-US"}, IncomingLocales: []encoding.Symbol{"en-US"},
			OfferedCapabilities: caps, DesiredCapabilities: caps, Properties: props,
		}},
		{"begin", &Begin{NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 0xffffffff}},
		{"begin reply", &Begin{
			RemoteChannel: ptr(uint16(0)), NextOutgoingID: 0, IncomingWindow: 1, OutgoingWindow: 2, HandleMax: 255,
			OfferedCapabilities: caps, DesiredCapabilities: caps, Properties: props,
		}},
		{"attach sender", &Attach{
			Name: "link", Handle: 3, Role: RoleSender,
			SndSettleMode: ptr(SenderSettleModeMixed), RcvSettleMode: ptr(ReceiverSettleModeSecond),
			Source: &Source{Address: "client-1"},
			Target: &Target{Address: "queue", Durable: DurabilityUnsettled, ExpiryPolicy: ExpiryNever, Timeout: 5,
				Dynamic: true, DynamicNodeProperties: props, Capabilities: caps},
			Unsettled:            encoding.Map{{Key: []byte{1}, Value: nil}},
			IncompleteUnsettled:  true,
			InitialDeliveryCount: ptr(uint32(0)),
			MaxMessageSize:       262144,
			OfferedCapabilities:  caps, DesiredCapabilities: caps, Properties: props,
		}},
		{"attach receiver with filter", &Attach{
			Name: "r", Handle: 0, Role: RoleReceiver,
			Source: &Source{
				Address: "q/$deadletterqueue", Durable: DurabilityConfiguration, ExpiryPolicy: ExpiryLinkDetach,
				Timeout: 1, Dynamic: true, DynamicNodeProperties: props, DistributionMode: "move",
				Filter: encoding.Map{{
					Key:   encoding.Symbol("com.microsoft:session-filter"),
					Value: encoding.Described{Descriptor: uint64(0x137000000C), Value: "s1"},
				}},
				DefaultOutcome: &Modified{DeliveryFailed: true},
				Outcomes:       []encoding.Symbol{"amqp:accepted:list", "amqp:rejected:list"},
				Capabilities:   caps,
			},
			Target: &Target{},
		}},
		{"attach null source and target", &Attach{Name: "refused", Handle: 1, Role: RoleReceiver}},
		{"attach coordinator", &Attach{Name: "txn", Handle: 2, Role: RoleSender,
			Source: &Source{}, Coordinator: &Coordinator{Capabilities: []encoding.Symbol{"amqp:local-transactions"}}}},
		{"flow session", &Flow{NextIncomingID: ptr(uint32(1)), IncomingWindow: 2, NextOutgoingID: 3, OutgoingWindow: 4}},
		{"flow link", &Flow{
			IncomingWindow: 1, NextOutgoingID: 0, OutgoingWindow: 1,
			Handle: ptr(uint32(0)), DeliveryCount: ptr(uint32(7)), LinkCredit: ptr(uint32(300)), Available: ptr(uint32(0)),
			Drain: true, Echo: true, Properties: props,
		}},
		{"transfer first", &Transfer{
			Handle: 1, DeliveryID: ptr(uint32(1 << 20)), DeliveryTag: []byte{1, 2, 3, 4},
			MessageFormat: ptr(MessageFormatBatch), More: true, Batchable: true,
			Payload: []byte("payload bytes"),
		}},
		{"transfer settled with state", &Transfer{
			Handle: 0, DeliveryID: ptr(uint32(0)), DeliveryTag: []byte{}, MessageFormat: ptr(uint32(0)),
			Settled: true, RcvSettleMode: ptr(ReceiverSettleModeFirst), State: &Received{SectionNumber: 1, SectionOffset: 2},
			Resume: true, Aborted: true,
		}},
		{"transfer continuation", &Transfer{Handle: 9, Payload: []byte{0}}},
		{"disposition accepted", &Disposition{Role: RoleReceiver, First: 5, Last: ptr(uint32(9)), Settled: true, State: &Accepted{}, Batchable: true}},
		{"disposition rejected", &Disposition{Role: RoleReceiver, First: 0, State: &Rejected{Error: amqpErr}}},
		{"disposition rejected no error", &Disposition{Role: RoleReceiver, First: 0, State: &Rejected{}}},
		{"disposition released", &Disposition{Role: RoleSender, First: 1, State: &Released{}}},
		{"disposition modified", &Disposition{Role: RoleReceiver, First: 1, State: &Modified{
			DeliveryFailed: true, UndeliverableHere: true, MessageAnnotations: encoding.Map{{Key: encoding.Symbol("x-opt-deferred"), Value: true}},
		}}},
		{"disposition declared", &Disposition{Role: RoleReceiver, First: 1, State: &Declared{TxnID: []byte("txn")}}},
		{"disposition transactional", &Disposition{Role: RoleReceiver, First: 1, State: &TransactionalState{TxnID: []byte("t"), Outcome: &Accepted{}}}},
		{"detach", &Detach{Handle: 4}},
		{"detach closed with error", &Detach{Handle: 4, Closed: true, Error: amqpErr}},
		{"end", &End{}},
		{"end with error", &End{Error: &Error{Condition: CondWindowViolation}}},
		{"close", &Close{}},
		{"close with error", &Close{Error: amqpErr}},
		{"sasl mechanisms", &SASLMechanisms{Mechanisms: []encoding.Symbol{"PLAIN", "ANONYMOUS"}}},
		{"sasl init", &SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00user\x00pass"), Hostname: "localhost"}},
		{"sasl init anonymous", &SASLInit{Mechanism: "ANONYMOUS"}},
		{"sasl challenge", &SASLChallenge{Challenge: []byte{}}},
		{"sasl response", &SASLResponse{Response: []byte("r")}},
		{"sasl outcome", &SASLOutcome{Code: SASLAuth, AdditionalData: []byte("d")}},
		{"sasl outcome ok", &SASLOutcome{Code: SASLOK}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := Frame{Type: tt.body.frameType(), Channel: 7, Body: tt.body}
			enc := mustWrite(t, want)
			got, err := ParseFrame(enc)
			if err != nil {
				t.Fatalf("ParseFrame(% x): %v", enc, err)
			}
			if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
			if again := mustWrite(t, got); !bytes.Equal(again, enc) {
				t.Errorf("re-encoding differs:\n got % x\nwant % x", again, enc)
			}
		})
	}
}

func TestDefaultsAppliedOnDecode(t *testing.T) {
	got, err := ParseFrame(mustWrite(t, Frame{Body: &Open{ContainerID: "c"}}))
	if err != nil {
		t.Fatal(err)
	}
	o := got.Body.(*Open)
	if o.MaxFrameSize != 0xffffffff || o.ChannelMax != 0 {
		// ChannelMax 0 was written explicitly; MaxFrameSize 0 means default.
		t.Errorf("MaxFrameSize %d ChannelMax %d", o.MaxFrameSize, o.ChannelMax)
	}
	// An open carrying only the container id gets the spec defaults.
	minimal := []byte{0, 0, 0, 0x11, 2, 0, 0, 0, 0x00, 0x53, 0x10, 0xc0, 0x04, 0x01, 0xa1, 0x01, 'c'}
	got, err = ParseFrame(minimal)
	if err != nil {
		t.Fatal(err)
	}
	want := &Open{ContainerID: "c", MaxFrameSize: 0xffffffff, ChannelMax: 0xffff}
	if diff := cmp.Diff(want, got.Body); diff != "" {
		t.Errorf("minimal open (-want +got):\n%s", diff)
	}

	a := &Attach{}
	if a.SenderSettleMode() != SenderSettleModeMixed || a.ReceiverSettleMode() != ReceiverSettleModeFirst {
		t.Errorf("default settle modes: %v %v", a.SenderSettleMode(), a.ReceiverSettleMode())
	}
}

func TestGoldenFrames(t *testing.T) {
	tests := []struct {
		name string
		f    Frame
		want []byte
	}{
		{"heartbeat", Frame{}, []byte{0, 0, 0, 8, 2, 0, 0, 0}},
		{"accepted disposition", Frame{Channel: 1, Body: &Disposition{Role: RoleReceiver, First: 0, Settled: true, State: &Accepted{}}},
			[]byte{0, 0, 0, 0x17, 2, 0, 0, 1, 0x00, 0x53, 0x15, 0xc0, 0x0a, 0x06, 0x41, 0x43, 0x40, 0x41, 0x00, 0x53, 0x24, 0x45, 0x40}},
		{"sasl outcome", Frame{Body: &SASLOutcome{Code: SASLOK}},
			[]byte{0, 0, 0, 0x11, 2, 1, 0, 0, 0x00, 0x53, 0x44, 0xc0, 0x04, 0x02, 0x50, 0x00, 0x40}},
		{"close", Frame{Body: &Close{}}, []byte{0, 0, 0, 0x0f, 2, 0, 0, 0, 0x00, 0x53, 0x18, 0xc0, 0x02, 0x01, 0x40}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustWrite(t, tt.f); !bytes.Equal(got, tt.want) {
				t.Errorf("Write = % x\n want % x", got, tt.want)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	e := &Error{Condition: CondNotFound, Description: "gone"}
	if got, want := e.Error(), "amqp error amqp:not-found: gone"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
