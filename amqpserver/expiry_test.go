package amqpserver

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// fakeNow is a clock the test moves forward: real time plus an offset.
type fakeNow struct{ offset atomic.Int64 }

func (f *fakeNow) Now() time.Time          { return time.Now().Add(time.Duration(f.offset.Load())) }
func (f *fakeNow) advance(d time.Duration) { f.offset.Add(int64(d)) }

// newExpiryServer starts a server whose token clock (validator and
// grants) is clk, without clock-skew tolerance, checking grants often.
func newExpiryServer(t *testing.T, clk *fakeNow) *testServer {
	t.Helper()
	v, err := sas.NewValidator(sas.Config{
		Rules:     []sas.Rule{{KeyName: testKeyName, Key: testKey, Rights: sas.Manage}},
		ClockSkew: -1,
		Now:       clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, func(c *Config) {
		c.Auth, c.Now, c.TokenCheckInterval = v, clk.Now, 20*time.Millisecond
	})
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q2"})
	return ts
}

// waitDetached waits for r's link to be detached by the server and
// returns the condition it carried.
func waitDetached(t *testing.T, r *amqp.Receiver) amqp.ErrCond {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := r.Receive(ctx, nil)
	var le *amqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil {
		t.Fatalf("Receive: %v, want the link detached by the server", err)
	}
	return le.RemoteErr.Condition
}

// Links live as long as the connection holds a live token for their
// entity: a token renewed before it lapses (a new put-token for the same
// audience, on a new session as the Go SDK does) keeps its links; links
// whose token lapsed are detached with amqp:unauthorized-access, entity
// and $management links alike.
func TestLinksDetachedWhenTokenLapses(t *testing.T) {
	clk := &fakeNow{}
	ts := newExpiryServer(t, clk)
	c := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	put := func(entity string, life time.Duration) {
		t.Helper()
		aud := "amqp://" + ts.addr + "/" + entity
		if st, desc := putToken(t, c, aud, sas.Sign(aud, testKeyName, testKey, clk.Now().Add(life))); st != 202 {
			t.Fatalf("put-token %s: %d %s", entity, st, desc)
		}
	}
	put("q", 10*time.Minute)
	put("q2", 10*time.Minute)
	put("q2/$management", 10*time.Minute)
	s := mustSession(t, c)
	sndQ := mustSender(t, s, "q")
	rcvQ := mustReceiver(t, s, "q", amqp.ReceiverSettleModeSecond)
	sndQ2 := mustSender(t, s, "q2")
	rcvQ2 := mustReceiver(t, s, "q2", amqp.ReceiverSettleModeSecond)
	mgmtQ2, err := s.NewReceiver(t.Context(), "q2/$management", &amqp.ReceiverOptions{TargetAddress: "mgmt-reply", Credit: 1})
	if err != nil {
		t.Fatal(err)
	}

	clk.advance(8 * time.Minute)
	put("q", 10*time.Minute) // renewed, now good until minute 18
	clk.advance(3 * time.Minute)

	// Minute 11: q2's token lapsed.
	if cond := waitDetached(t, rcvQ2); cond != amqp.ErrCondUnauthorizedAccess {
		t.Errorf("q2 receiver detached with %s, want unauthorized-access", cond)
	}
	if cond := waitDetached(t, mgmtQ2); cond != amqp.ErrCondUnauthorizedAccess {
		t.Errorf("q2 $management link detached with %s, want unauthorized-access", cond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := sndQ2.Send(ctx, amqp.NewMessage([]byte("too late")), nil); err == nil {
		t.Error("send on q2 after its token lapsed succeeded")
	}
	// The check that cut q2 ran at minute 11 or later; q's renewed token
	// kept its links.
	mustSend(t, sndQ, "renewed")
	if got := string(mustReceive(t, rcvQ).GetData()); got != "renewed" {
		t.Errorf("received %q", got)
	}

	// A new token brings q2 back on new links.
	put("q2", 10*time.Minute)
	mustSend(t, mustSender(t, s, "q2"), "q2 again")

	// Minute 19: the renewed token for q lapsed as well.
	clk.advance(8 * time.Minute)
	if cond := waitDetached(t, rcvQ); cond != amqp.ErrCondUnauthorizedAccess {
		t.Errorf("q receiver detached with %s, want unauthorized-access", cond)
	}
}

// A connection with a SASL PLAIN login holds its rule's rights for good:
// no token, nothing lapses.
func TestPlainLinksDoNotLapse(t *testing.T) {
	clk := &fakeNow{}
	ts := newExpiryServer(t, clk)
	s := ts.session(t)
	snd := mustSender(t, s, "q")
	// An anonymous connection whose token lapses shows when a check ran.
	anon := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	aud := "amqp://" + ts.addr + "/q"
	if st, desc := putToken(t, anon, aud, sas.Sign(aud, testKeyName, testKey, clk.Now().Add(time.Minute))); st != 202 {
		t.Fatalf("put-token: %d %s", st, desc)
	}
	r := mustReceiver(t, mustSession(t, anon), "q", amqp.ReceiverSettleModeSecond)
	clk.advance(24 * time.Hour)
	waitDetached(t, r)
	mustSend(t, snd, "plain never lapses")
}

// The official Go SDK with a connection string carrying a fixed
// SharedAccessSignature (which it never renews) loses its links when the
// token lapses and reports UnauthorizedAccess, as with Service Bus.
func TestSDKFixedTokenLapses(t *testing.T) {
	clk := &fakeNow{}
	ts := newExpiryServer(t, clk)
	tok := sas.Sign("amqp://"+ts.addr+"/", testKeyName, testKey, clk.Now().Add(time.Hour))
	cs := "Endpoint=sb://" + ts.addr + ";SharedAccessSignature=" + tok + ";UseDevelopmentEmulator=true"
	client, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 1, RetryDelay: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	defer client.Close(ctx)
	snd, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(ctx)
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("in time")}, nil); err != nil {
		t.Fatalf("SendMessage with a live token: %v", err)
	}
	rcv, err := client.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close(ctx)
	m := receiveOne(t, rcv)
	if err := rcv.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}

	clk.advance(2 * time.Hour)
	// The detach reaches the SDK's links asynchronously; the send that
	// meets it fails, and recovery cannot put the lapsed token again.
	var sbErr *azservicebus.Error
	waitFor(t, "a send to fail with UnauthorizedAccess", 20*time.Second, func() bool {
		err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("too late")}, nil)
		return errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeUnauthorizedAccess
	})
}
