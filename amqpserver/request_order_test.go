package amqpserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core/sas"
)

// TestRequestSettledBeforeReply: a $cbs or $management request is
// settled (accepted) before its reply is sent, whatever the timing, as
// uamqp needs (it forgets a request when the reply comes, and a later
// settlement crashed the Python SDK). The frames are read in the order
// the server wrote them.
func TestRequestSettledBeforeReply(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()

	aud := "amqp://" + ts.addr + "/q"
	requests := []struct {
		node, op string
		app      encoding.Map
		value    any
	}{
		{"$cbs", "put-token", encoding.Map{{Key: "type", Value: "servicebus.windows.net:sastoken"}, {Key: "name", Value: aud}},
			sas.Sign(aud, testKeyName, testKey, time.Now().Add(time.Hour))},
		{"q/$management", "com.microsoft:peek-message", nil,
			encoding.Map{{Key: "from-sequence-number", Value: int64(0)}, {Key: "message-count", Value: int32(1)}}},
	}
	for i, r := range requests {
		snd, rcv := uint32(2*i), uint32(2*i+1)
		replyTo := fmt.Sprintf("reply-%d", i)
		p.writeFrame(0, &frames.Attach{Name: replyTo + "-snd", Handle: snd, Role: frames.RoleSender,
			Source: &frames.Source{}, Target: &frames.Target{Address: r.node}})
		p.writeFrame(0, &frames.Attach{Name: replyTo + "-rcv", Handle: rcv, Role: frames.RoleReceiver,
			Source: &frames.Source{Address: r.node}, Target: &frames.Target{Address: replyTo}})
		zero, credit := uint32(0), uint32(10)
		next := uint32(i)
		p.writeFrame(0, &frames.Flow{NextIncomingID: &next, IncomingWindow: 100, NextOutgoingID: uint32(i), OutgoingWindow: 100,
			Handle: &rcv, DeliveryCount: &zero, LinkCredit: &credit})
		req := &frames.Message{
			Properties:            &frames.MessageProperties{MessageID: uint64(i + 1), ReplyTo: replyTo},
			ApplicationProperties: append(encoding.Map{{Key: "operation", Value: r.op}}, r.app...),
			Value:                 r.value,
		}
		var b buffer.Buffer
		if err := req.MarshalAMQP(&b); err != nil {
			t.Fatal(err)
		}
		id, format := uint32(i), uint32(0)
		p.writeFrame(0, &frames.Transfer{Handle: snd, DeliveryID: &id, DeliveryTag: []byte{byte(i)}, MessageFormat: &format, Payload: b.Bytes()})

		settled := false
		for done := false; !done; {
			switch f := p.readFrame().(type) {
			case *frames.Disposition:
				if f.Role == frames.RoleReceiver && f.First <= id && (f.Last == nil || *f.Last >= id) {
					if _, ok := f.State.(*frames.Accepted); !ok || !f.Settled {
						t.Fatalf("%s request answered %+v, want settled accepted", r.node, f)
					}
					settled = true
				}
			case *frames.Transfer:
				if f.Handle != rcv {
					t.Fatalf("transfer on handle %d", f.Handle)
				}
				if !settled {
					t.Fatalf("%s: the reply came before the request was settled", r.node)
				}
				done = true
			case *frames.Close:
				t.Fatalf("closed: %v", f.Error)
			case *frames.Detach:
				t.Fatalf("%s: link %d detached: %v", r.node, f.Handle, f.Error)
			}
		}
	}
}
