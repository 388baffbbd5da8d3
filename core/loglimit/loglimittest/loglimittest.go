// Package loglimittest measures what a flood makes a front log: a sink
// that counts, a logger writing into it as the binary logs, and the bound
// issue 31 set for a flood.
package loglimittest

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/omnibusmq/omnibus/core/loglimit"
)

// Sink is a log destination that only counts bytes and lines.
type Sink struct{ Bytes, Lines atomic.Int64 }

// Write counts p as one line.
func (s *Sink) Write(p []byte) (int, error) {
	s.Bytes.Add(int64(len(p)))
	s.Lines.Add(1)
	return len(p), nil
}

// Sync does nothing.
func (s *Sink) Sync() error { return nil }

// Logger logs at info level into sink in the binary's format (console
// encoding, ISO 8601 times), named name.
func Logger(sink *Sink, name string) *zap.Logger {
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(ec), sink, zapcore.InfoLevel)).Named(name)
}

// FloodBudget is what a flood of d may add to the log under the default
// [loglimit.Config]: issue 31 allows under 1 MB in 60 s, so the
// limiter's burst plus d's share of the rest.
func FloodBudget(d time.Duration) int64 {
	const perMinute = 1 << 20
	return loglimit.DefaultBurst + int64(float64(perMinute-loglimit.DefaultBurst)*d.Seconds()/60)
}
