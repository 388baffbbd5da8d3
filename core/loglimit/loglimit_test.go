package loglimit

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// sink is a log destination that keeps what was written.
type sink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *sink) Sync() error { return nil }

func (s *sink) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSpace(s.buf.String()), "\n")
}

func (s *sink) count(msg string) int {
	n := 0
	for _, l := range s.lines() {
		if strings.Contains(l, `"msg":"`+msg+`"`) {
			n++
		}
	}
	return n
}

func (s *sink) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

// fakeNow is a clock the test moves.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time          { return f.t }
func (f *fakeNow) advance(d time.Duration) { f.t = f.t.Add(d) }

func newTestLogger(t testing.TB, lvl zapcore.Level) (*zap.Logger, *sink) {
	t.Helper()
	s := &sink{}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, s, lvl)), s
}

// One scope writes the first line of a message, then one per ScopeEvery,
// and that line says how many were held back.
func TestScopeSpacesEachMessage(t *testing.T) {
	clk := &fakeNow{t: time.Unix(1000, 0)}
	lim := New(Config{Now: clk.now, ScopeEvery: 10 * time.Second})
	base, out := newTestLogger(t, zapcore.InfoLevel)
	log := lim.Scope(base).With(zap.String("conn", "c1"))
	for range 100 {
		log.Warn("reply dropped")
		log.Info("other message")
	}
	if got := out.count("reply dropped"); got != 1 {
		t.Fatalf("%d lines of one message in one scope at once, want 1", got)
	}
	if got := out.count("other message"); got != 1 {
		t.Fatalf("a second message: %d lines, want its own 1", got)
	}
	clk.advance(10 * time.Second)
	log.Warn("reply dropped")
	lines := out.lines()
	last := lines[len(lines)-1]
	if !strings.Contains(last, `"suppressed":99`) || !strings.Contains(last, `"conn":"c1"`) {
		t.Fatalf("line after the gap = %s, want suppressed 99 and the scope's fields", last)
	}
	if got := lim.Suppressed()["reply dropped"]; got != 99 {
		t.Fatalf("Suppressed = %d, want 99", got)
	}
}

// New scopes (a client reconnecting) do not get past the global
// per-message bucket.
func TestNewScopesShareTheGlobalBuckets(t *testing.T) {
	clk := &fakeNow{t: time.Unix(1000, 0)}
	lim := New(Config{Now: clk.now, MessageBurst: 5, MessagesPerSecond: 1})
	base, out := newTestLogger(t, zapcore.InfoLevel)
	for range 1000 {
		lim.Scope(base).Info("SASL authentication failed")
	}
	if got := out.count("SASL authentication failed"); got != 5 {
		t.Fatalf("1000 scopes at once wrote %d lines, want the burst of 5", got)
	}
	clk.advance(3 * time.Second)
	for range 1000 {
		lim.Scope(base).Info("SASL authentication failed")
	}
	if got := out.count("SASL authentication failed"); got != 8 {
		t.Fatalf("3 s later: %d lines in all, want 5 + 3", got)
	}
	if got := lim.Suppressed()["SASL authentication failed"]; got != 2000-8 {
		t.Fatalf("Suppressed = %d, want %d", got, 2000-8)
	}
}

// Whatever the messages, the bytes of every scope together stay within
// Burst + BytesPerSecond × elapsed.
func TestBytesBoundedGlobally(t *testing.T) {
	clk := &fakeNow{t: time.Unix(1000, 0)}
	const burst, rate = 4 << 10, 1 << 10
	lim := New(Config{Now: clk.now, Burst: burst, BytesPerSecond: rate, MessageBurst: 1 << 20, MessagesPerSecond: 1 << 20})
	base, out := newTestLogger(t, zapcore.InfoLevel)
	long := strings.Repeat("x", 200)
	for sec := range 60 {
		for i := range 100 {
			lim.Scope(base).Warn("flood "+string(rune('a'+i%26)), zap.String("payload", long))
		}
		if got, bound := out.len(), burst+rate*sec; got > bound {
			t.Fatalf("after %d s: %d bytes written, bound %d", sec, got, bound)
		}
		clk.advance(time.Second)
	}
	if out.len() < burst+rate*50 {
		t.Fatalf("%d bytes in 60 s: the bucket lets through far less than its rate", out.len())
	}
}

// Debug lines are never limited.
func TestDebugUnlimited(t *testing.T) {
	lim := New(Config{})
	base, out := newTestLogger(t, zapcore.DebugLevel)
	log := lim.Scope(base)
	for range 500 {
		log.Debug("RX")
	}
	if got := out.count("RX"); got != 500 {
		t.Fatalf("%d debug lines of 500", got)
	}
}

// Past maxReasons distinct messages, the rest share the reason "other",
// so the metric's label set stays small.
func TestReasonsCapped(t *testing.T) {
	lim := New(Config{MessageBurst: 1})
	base, _ := newTestLogger(t, zapcore.InfoLevel)
	for i := range maxReasons + 50 {
		log := lim.Scope(base)
		msg := "m" + strings.Repeat("x", i)
		log.Info(msg)
		log.Info(msg)
		lim.Scope(base).Info(msg)
	}
	got := lim.Suppressed()
	if len(got) > maxReasons+1 {
		t.Fatalf("%d reasons, want at most %d", len(got), maxReasons+1)
	}
	if got[OtherReason] == 0 {
		t.Fatalf("no %q reason after %d messages", OtherReason, maxReasons+50)
	}
}

// StdLog writes every line under one message, the text as a field, so
// texts that name peers do not each become a reason of their own.
func TestStdLogSharesOneReason(t *testing.T) {
	lim := New(Config{})
	base, out := newTestLogger(t, zapcore.InfoLevel)
	std := lim.StdLog(base, "listener error")
	for i := range 100 {
		std.Printf("http: Accept error: too many open files from 10.0.0.%d; retrying", i)
	}
	if got := out.count("listener error"); got != 1 {
		t.Fatalf("%d lines written, want 1", got)
	}
	if !strings.Contains(out.lines()[0], `"error":"http: Accept error: too many open files from 10.0.0.0; retrying"`) {
		t.Fatalf("line %s lacks the text as a field", out.lines()[0])
	}
	if got := lim.Suppressed(); len(got) != 1 || got["listener error"] != 99 {
		t.Fatalf("Suppressed = %v, want 99 under one reason", got)
	}
}
