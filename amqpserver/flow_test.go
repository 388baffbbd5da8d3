package amqpserver

import (
	"fmt"
	"math"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core/coretest"
)

func TestLinkCredit(t *testing.T) {
	for _, c := range []struct {
		flowCount, flowCredit, ourCount, want uint32
	}{
		{0, 10, 0, 10},
		{0, 10, 4, 6},            // 4 sent that the flow had not seen
		{0, 10, 12, 0},           // more sent than it allowed
		{0, 1 << 31, 0, 1 << 31}, // 2^31 is a credit like any other
		{0, math.MaxUint32, 0, math.MaxUint32},
		{5, math.MaxUint32, 7, math.MaxUint32 - 2},
		{math.MaxUint32 - 1, 10, 1, 7}, // counts wrap (serial numbers)
		{9, 10, 5, 10},                 // a count ahead of ours: credit as given
	} {
		if got := linkCredit(c.flowCount, c.flowCredit, c.ourCount); got != c.want {
			t.Errorf("linkCredit(%d, %d, %d) = %d, want %d", c.flowCount, c.flowCredit, c.ourCount, got, c.want)
		}
	}
}

// attachRawReceiver begins a session with the given incoming window and
// attaches handle 0 as a receiver of source in peek-lock (second) or
// receive-and-delete (first) mode.
func (p *rawPeer) attachRawReceiver(source string, window uint32, mode frames.ReceiverSettleMode) {
	p.t.Helper()
	p.writeFrame(0, &frames.Begin{IncomingWindow: window, OutgoingWindow: 100, HandleMax: 10})
	if _, ok := p.readFrame().(*frames.Begin); !ok {
		p.t.Fatal("no begin")
	}
	p.writeFrame(0, &frames.Attach{Name: "raw-receiver", Handle: 0, Role: frames.RoleReceiver,
		RcvSettleMode: &mode, Source: &frames.Source{Address: source}, Target: &frames.Target{}})
	if a, ok := p.readFrame().(*frames.Attach); !ok || a.Source == nil {
		p.t.Fatalf("attach answered with %+v", a)
	}
}

// grant sends a flow with the session window and link credit given.
func (p *rawPeer) grant(nextIncoming, window, deliveryCount, credit uint32) {
	p.t.Helper()
	h := uint32(0)
	p.writeFrame(0, &frames.Flow{NextIncomingID: &nextIncoming, IncomingWindow: window, OutgoingWindow: 100,
		Handle: &h, DeliveryCount: &deliveryCount, LinkCredit: &credit})
}

// TestHugeCredit grants 2^31 and 2^32-1 credits, which a sign error once
// read as none.
func TestHugeCredit(t *testing.T) {
	for _, credit := range []uint32{1 << 31, math.MaxUint32} {
		t.Run(fmt.Sprint(credit), func(t *testing.T) {
			ts := newTestServer(t, nil)
			ts.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"), coretest.Text("c"))
			p := ts.rawDial(t)
			p.open()
			p.attachRawReceiver("q", 100, frames.ReceiverSettleModeSecond)
			p.grant(0, 100, 0, credit)
			for i := range 3 {
				if tr, ok := p.readFrame().(*frames.Transfer); !ok {
					t.Fatalf("frame %d: %+v, want a transfer", i, tr)
				}
			}
		})
	}
}
