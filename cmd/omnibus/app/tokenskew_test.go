package app

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// startSkewTest starts an in-memory app with queue q and the given
// Options.TokenClockSkew.
func startSkewTest(t *testing.T, skew time.Duration) *App {
	t.Helper()
	a, err := Start(Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "-", AMQPSAddr: "-",
		TokenClockSkew: skew, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	if _, err := a.Broker.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestTokenClockSkew: Options.TokenClockSkew (--token-clock-skew) is how
// long past its expiry a token is still accepted, on both fronts: a token
// that expired a minute ago is accepted with the default 5 minutes and
// refused with 30 seconds, over REST (401) and on $cbs (put-token 401).
func TestTokenClockSkew(t *testing.T) {
	for _, c := range []struct {
		name     string
		skew     time.Duration
		accepted bool
	}{
		{"default", 0, true},
		{"30s", 30 * time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := startSkewTest(t, c.skew)
			expired := time.Now().Add(-time.Minute)

			url := "http://" + a.HTTPAddr().String() + "/q/messages"
			req, err := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader("m"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", sas.Sign("http://"+a.HTTPAddr().String()+"/q", DefaultKeyName, DefaultKey, expired))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if want := map[bool]int{true: http.StatusCreated, false: http.StatusUnauthorized}[c.accepted]; resp.StatusCode != want {
				t.Errorf("REST send with a token expired a minute ago: %d, want %d", resp.StatusCode, want)
			}

			aud := "amqp://" + a.AMQPAddr().String() + "/q"
			conn := dialAnonymous(t, a)
			if status, desc := putToken(t, conn, aud, sas.Sign(aud, DefaultKeyName, DefaultKey, expired)); (status == 202) != c.accepted {
				t.Errorf("put-token with a token expired a minute ago: %d %s, want accepted=%v", status, desc, c.accepted)
			}
		})
	}
}

// TestLinkEndsAtExpiryPlusSkew: a link attached on a $cbs token is
// detached with amqp:unauthorized-access once the token's expiry plus
// Options.TokenClockSkew has passed.
func TestLinkEndsAtExpiryPlusSkew(t *testing.T) {
	const skew = time.Second
	a := startSkewTest(t, skew)
	aud := "amqp://" + a.AMQPAddr().String() + "/q"
	conn := dialAnonymous(t, a)
	expires := time.Now().Add(time.Second)
	if status, desc := putToken(t, conn, aud, sas.Sign(aud, DefaultKeyName, DefaultKey, expires)); status != 202 {
		t.Fatalf("put-token: %d %s", status, desc)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := s.NewReceiver(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rcv.Receive(ctx, nil) // nothing to receive: it waits until the link ends
	ended := time.Now()
	var le *amqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != amqp.ErrCondUnauthorizedAccess {
		t.Fatalf("receive on a link whose token lapsed: %v, want a detach with unauthorized-access", err)
	}
	// Seconds are the token's resolution: it lapses within one of expires.
	if lapse := expires.Truncate(time.Second).Add(skew); ended.Before(lapse) {
		t.Errorf("link detached at %v, before the token's expiry plus the skew (%v)", ended, lapse)
	}
}

// dialAnonymous opens an AMQP connection with SASL ANONYMOUS, as the SDKs
// do before they put a token on $cbs.
func dialAnonymous(t *testing.T, a *App) *amqp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := amqp.Dial(ctx, "amqp://"+a.AMQPAddr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// putToken runs one $cbs put-token as the Go SDK does and returns the
// reply's status code and description.
func putToken(t *testing.T, c *amqp.Conn, audience, token string) (int32, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	snd, err := s.NewSender(ctx, "$cbs", nil)
	if err != nil {
		t.Fatal(err)
	}
	replyTo := "$cbs-reply-to-skew"
	rcv, err := s.NewReceiver(ctx, "$cbs", &amqp.ReceiverOptions{TargetAddress: replyTo, Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	req := &amqp.Message{Value: token, Properties: &amqp.MessageProperties{MessageID: "put", ReplyTo: &replyTo},
		ApplicationProperties: map[string]any{"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": audience}}
	if err := snd.Send(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, _ := m.ApplicationProperties["status-code"].(int32)
	desc, _ := m.ApplicationProperties["status-description"].(string)
	return status, desc
}
