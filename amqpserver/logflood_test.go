package amqpserver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core/loglimit"
	"github.com/omnibusmq/omnibus/core/loglimit/loglimittest"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Every attack issue 31 found writing a line per request, run together
// with real go-amqp clients for a few seconds: put-tokens with a wrong
// key and valid ones, each with a reply link that grants no credit;
// connections that reconnect as soon as the authentication deadline
// closes them; and logins with a wrong key in a loop. The log stays
// within a bound that comes to under 1 MB a minute, what was held back
// is counted by reason, and a client with a key is served throughout.
func TestUnauthenticatedFloodLogBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("floods the server for 3 s")
	}
	sink := &loglimittest.Sink{}
	lim := loglimit.New(loglimit.Config{})
	ts := newTestServer(t, func(c *Config) {
		c.Logger = loglimittest.Logger(sink, "amqp")
		c.LogLimiter = lim
		c.AuthTimeout = 500 * time.Millisecond // the flood reconnects several times
	})
	const floodFor = 3 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), floodFor)
	defer cancel()
	aud := "amqp://" + ts.addr + "/q"
	good := sas.Sign(aud, testKeyName, testKey, time.Now().Add(time.Hour))
	bad := "SharedAccessSignature sr=q&sig=bad&se=9999999999&skn=" + testKeyName
	var requests, logins atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, token := range []string{bad, bad, good} {
		wg.Go(func() {
			for ctx.Err() == nil {
				requests.Add(floodPutTokens(ctx, ts.addr, aud, token))
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			c, err := amqp.Dial(ctx, "amqp://"+ts.addr, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, "wrong")})
			if err == nil {
				c.Close()
			}
			logins.Add(1)
		}
	})
	wg.Wait()
	elapsed := time.Since(start)

	// The server still serves a client with a key.
	snd := mustSender(t, ts.session(t), "q")
	mustSend(t, snd, "after the flood")

	written, budget := sink.Bytes.Load(), loglimittest.FloodBudget(elapsed)
	suppressed := lim.Suppressed()
	t.Logf("%v of flood: %d put-tokens, %d wrong logins; %d log lines, %d bytes (budget %d); held back: %v",
		elapsed.Round(time.Millisecond), requests.Load(), logins.Load(), sink.Lines.Load(), written, budget, suppressed)
	if requests.Load() < 1000 || logins.Load() < 20 {
		t.Fatalf("the flood was too weak to tell anything: %d put-tokens, %d logins", requests.Load(), logins.Load())
	}
	if written > budget {
		t.Errorf("the flood wrote %d bytes of log in %v, more than the %d that make 1 MB a minute", written, elapsed, budget)
	}
	for _, reason := range []string{"reply dropped: the client does not read its replies", "SASL authentication failed"} {
		if suppressed[reason] == 0 {
			t.Errorf("no %q lines held back; the flood did not reach that line, or the limiter does not count it", reason)
		}
	}
}

// floodPutTokens connects with SASL ANONYMOUS, attaches a $cbs reply
// link that never grants credit and sends put-tokens for aud, settled,
// as fast as the connection takes them, until ctx ends or the server
// closes the connection. It returns how many it sent.
func floodPutTokens(ctx context.Context, addr, aud, token string) int64 {
	c, err := amqp.Dial(ctx, "amqp://"+addr, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	if err != nil {
		return 0
	}
	defer c.Close()
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		return 0
	}
	replyTo := "$cbs-flood"
	if _, err := s.NewReceiver(ctx, "$cbs", &amqp.ReceiverOptions{TargetAddress: replyTo, Credit: -1}); err != nil {
		return 0
	}
	snd, err := s.NewSender(ctx, "$cbs", &amqp.SenderOptions{SettlementMode: amqp.SenderSettleModeSettled.Ptr()})
	if err != nil {
		return 0
	}
	var n int64
	for ctx.Err() == nil {
		req := &amqp.Message{
			Value:      token,
			Properties: &amqp.MessageProperties{MessageID: fmt.Sprint(n), ReplyTo: &replyTo},
			ApplicationProperties: map[string]any{
				"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": aud, "expiration": "0",
			},
		}
		if err := snd.Send(ctx, req, nil); err != nil {
			return n
		}
		n++
	}
	return n
}
