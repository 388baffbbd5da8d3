package amqpserver

import (
	"fmt"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// TestTransfersBeforeHangUp: a client that writes a burst of transfers
// and closes its socket at once (no detach, end or close) still has every
// delivery it finished stored, and the one it left unfinished (its last
// frame had more=true) stored nowhere: nothing is half-applied. Whether
// the client asks for answers (settled=false, as the SDKs do: writing
// them then meets a reset socket) or not, the frames it wrote before
// hanging up are read and handled, in order.
func TestTransfersBeforeHangUp(t *testing.T) {
	const n, rounds = 300, 3
	for _, settled := range []bool{true, false} {
		t.Run(fmt.Sprintf("settled=%v", settled), func(t *testing.T) {
			ts := newTestServer(t, nil)
			ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "hq"})
			body := dataSection(t, 200)
			for round := range rounds {
				p := ts.rawDial(t)
				p.open()
				p.writeFrame(0, &frames.Begin{IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 10})
				p.readFrame() // begin
				attach := senderAttach("hq")
				if settled {
					mode := frames.SenderSettleModeSettled
					attach.SndSettleMode = &mode
				}
				p.writeFrame(0, attach)
				p.readFrame() // attach
				if fl, ok := p.readFrame().(*frames.Flow); !ok || fl.LinkCredit == nil || *fl.LinkCredit < n+1 {
					t.Fatalf("attach followed by %+v, want a flow with at least %d credit", fl, n+1)
				}
				burst := make([]frames.Body, 0, n+2)
				for id := range uint32(n) {
					tr := transferFrame(0, id, true, false, body)
					tr.Settled = settled
					burst = append(burst, tr)
				}
				// An unfinished delivery: its first half only.
				burst = append(burst, transferFrame(0, n, true, true, body[:len(body)/2]))
				p.writeFrames(0, burst...)
				p.nc.Close()
				waitFor(t, "the server to end the connection", 30*time.Second, func() bool {
					ts.srv.mu.Lock()
					defer ts.srv.mu.Unlock()
					return ts.srv.mu.open == 0
				})
				if c := ts.MustCounts(t, "hq"); c.Active != int64((round+1)*n) {
					t.Fatalf("round %d: %d messages stored, want %d (every finished delivery, not the unfinished one)",
						round, c.Active, (round+1)*n)
				}
			}
		})
	}
}
