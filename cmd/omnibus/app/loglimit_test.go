package app

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"go.uber.org/zap/zaptest"
)

// Logins with a wrong key, each on a connection of its own, are logged
// only as far as the log limiter lets them (its burst, then one a
// second); the rest are counted in omnibus_log_suppressed_total with the
// line's message as the reason.
func TestLogSuppressedMetric(t *testing.T) {
	a, err := Start(Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-",
		MetricsAddr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	const logins = 40
	for range logins {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		c, err := amqp.Dial(ctx, "amqp://"+a.AMQPAddr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(DefaultKeyName, "wrong")})
		cancel()
		if err == nil {
			c.Close()
			t.Fatal("a login with a wrong key succeeded")
		}
	}
	got, ok := value(scrapeMetrics(t, a), "omnibus_log_suppressed_total", "reason", "SASL authentication failed")
	// The limiter's burst is 10 lines of one message; a slow machine
	// may have earned a few more since.
	if !ok || got < logins-20 {
		t.Fatalf("omnibus_log_suppressed_total{reason=\"SASL authentication failed\"} = %v (present: %v) after %d failed logins, want at least %d",
			got, ok, logins, logins-20)
	}
}
