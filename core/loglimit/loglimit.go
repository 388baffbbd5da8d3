// Package loglimit bounds the log lines that peers can cause.
//
// Anything a client can make the broker log — a refused token, a reply
// nobody reads, a failed login, a malformed request — it can make the
// broker log a thousand times a second, and the log shares the data disk.
// A [Limiter] sits between such a logger and its sink, as a zapcore.Core
// wrapper, and lets a line through only when three gates agree:
//
//   - per scope and message: one line per [Config.ScopeEvery] for each
//     message of one scope (an AMQP connection, the HTTP gateway); the
//     line that passes carries how many were held back since, in the
//     field "suppressed";
//   - per message, globally: at most [Config.MessageBurst] lines of one
//     message at once, refilled at [Config.MessagesPerSecond], so that a
//     client that reconnects to get a fresh scope still gets nothing more;
//   - in bytes, globally: the encoded lines of every scope together stay
//     within [Config.Burst] plus [Config.BytesPerSecond] per second.
//
// What a gate holds back is counted per message ([Limiter.Suppressed]),
// which cmd/omnibus exports as omnibus_log_suppressed_total{reason}. The
// message is the reason: messages are constants in the code, so the set
// is small (and capped at [maxReasons] all the same).
//
// Debug lines are never limited: an operator who turns them on asked for
// every one.
package loglimit

import (
	stdlog "log"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults for the zero fields of [Config]. At most 64 KiB at once and
// 4 KiB a second after it: a minute of any flood adds at most 304 KiB.
const (
	DefaultBytesPerSecond    = 4 << 10
	DefaultBurst             = 64 << 10
	DefaultMessagesPerSecond = 1.0
	DefaultMessageBurst      = 10
	DefaultScopeEvery        = 10 * time.Second
)

// maxReasons caps the distinct messages a Limiter keeps state for; the
// rest share the reason [OtherReason].
const maxReasons = 256

// OtherReason is the reason of the messages beyond the first
// [maxReasons].
const OtherReason = "other"

// Config sets a Limiter's rates; the zero value of each field means its
// default.
type Config struct {
	// BytesPerSecond and Burst bound the bytes of every limited line
	// together, measured as JSON-encoded (a token bucket). A line larger
	// than Burst never passes.
	BytesPerSecond float64
	Burst          int
	// MessagesPerSecond and MessageBurst bound the lines of one message
	// across every scope (a token bucket per message).
	MessagesPerSecond float64
	MessageBurst      int
	// ScopeEvery is the least time between two lines of one message in
	// one scope.
	ScopeEvery time.Duration
	// Now tells the time; default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.BytesPerSecond <= 0 {
		c.BytesPerSecond = DefaultBytesPerSecond
	}
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.MessagesPerSecond <= 0 {
		c.MessagesPerSecond = DefaultMessagesPerSecond
	}
	if c.MessageBurst <= 0 {
		c.MessageBurst = DefaultMessageBurst
	}
	if c.ScopeEvery <= 0 {
		c.ScopeEvery = DefaultScopeEvery
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Limiter holds the global gates. One is shared by everything a process
// lets peers log through; it is safe for concurrent use.
type Limiter struct {
	cfg Config
	// enc measures lines: every scope clones it, and a clone adds its
	// logger's context fields.
	enc zapcore.Encoder

	mu struct {
		sync.Mutex                    // guards the fields below
		bytes      bucket             // every line's bytes
		messages   map[string]*bucket // lines per message
		suppressed map[string]int64   // lines held back, by reason
	}
}

// New returns a Limiter with cfg's rates.
func New(cfg Config) *Limiter {
	cfg.setDefaults()
	l := &Limiter{cfg: cfg, enc: zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())}
	now := cfg.Now()
	l.mu.bytes = bucket{tokens: float64(cfg.Burst), at: now}
	l.mu.messages = map[string]*bucket{}
	l.mu.suppressed = map[string]int64{}
	return l
}

// Scope returns log with its lines at info level and above limited: a new
// scope (its own per-message spacing, see the package doc) under the
// Limiter's global gates. Loggers derived from the result (With, Named)
// share the scope.
func (l *Limiter) Scope(log *zap.Logger) *zap.Logger {
	s := &scope{last: map[string]*scopeEntry{}}
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return &limitedCore{Core: c, lim: l, scope: s, enc: l.enc}
	}))
}

// StdLog returns a standard library logger (for an http.Server's
// ErrorLog) that writes each line at info level, as msg with the line's
// text in the field "error", through a new scope: the text, which may
// name a peer, does not become a reason of its own.
func (l *Limiter) StdLog(log *zap.Logger, msg string) *stdlog.Logger {
	return stdlog.New(stdWriter{l.Scope(log), msg}, "", 0)
}

type stdWriter struct {
	log *zap.Logger
	msg string
}

func (w stdWriter) Write(p []byte) (int, error) {
	w.log.Info(w.msg, zap.String("error", strings.TrimSuffix(string(p), "\n")))
	return len(p), nil
}

// Suppressed returns the lines held back so far, by reason (the message).
func (l *Limiter) Suppressed() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int64, len(l.mu.suppressed))
	for k, v := range l.mu.suppressed {
		out[k] = v
	}
	return out
}

// reasonLocked returns the key msg is counted and limited under.
func (l *Limiter) reasonLocked(msg string) string {
	if _, ok := l.mu.messages[msg]; ok || len(l.mu.messages) < maxReasons {
		return msg
	}
	return OtherReason
}

// allowMessage takes one line of msg from its global bucket.
func (l *Limiter) allowMessage(msg string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := l.reasonLocked(msg)
	b := l.mu.messages[key]
	if b == nil {
		b = &bucket{tokens: float64(l.cfg.MessageBurst), at: now}
		l.mu.messages[key] = b
	}
	if b.take(1, l.cfg.MessagesPerSecond, float64(l.cfg.MessageBurst), now) {
		return true
	}
	l.mu.suppressed[key]++
	return false
}

// allowBytes takes n bytes of msg's line from the global byte bucket.
func (l *Limiter) allowBytes(msg string, n int, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.bytes.take(float64(n), l.cfg.BytesPerSecond, float64(l.cfg.Burst), now) {
		return true
	}
	l.mu.suppressed[l.reasonLocked(msg)]++
	return false
}

// suppress counts one line of msg held back by its scope.
func (l *Limiter) suppress(msg string) {
	l.mu.Lock()
	l.mu.suppressed[l.reasonLocked(msg)]++
	l.mu.Unlock()
}

// bucket is a token bucket: tokens refill at a rate up to a cap.
type bucket struct {
	tokens float64
	at     time.Time // when tokens was last refilled
}

// take refills the bucket to now and takes n tokens if it holds them.
func (b *bucket) take(n, rate, capacity float64, now time.Time) bool {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(capacity, b.tokens+d.Seconds()*rate)
		b.at = now
	}
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}
