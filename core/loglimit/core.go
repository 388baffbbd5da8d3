package loglimit

import (
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// limitedCore is the zapcore.Core a scoped logger writes through: it asks
// the scope and the Limiter before passing a line to the Core it wraps.
type limitedCore struct {
	zapcore.Core
	lim   *Limiter
	scope *scope
	// enc has the logger's context fields added; it encodes a line once
	// more, as JSON, to charge its size to the byte bucket.
	enc zapcore.Encoder
}

func (c *limitedCore) With(fields []zapcore.Field) zapcore.Core {
	enc := c.enc.Clone()
	for _, f := range fields {
		f.AddTo(enc)
	}
	return &limitedCore{Core: c.Core.With(fields), lim: c.lim, scope: c.scope, enc: enc}
}

// Check passes debug lines through, and a line at info level or above
// only when its scope and its message's global bucket let it; the bytes
// are charged in Write, once the fields are known.
func (c *limitedCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Enabled(ent.Level) {
		return ce
	}
	if ent.Level < zapcore.InfoLevel {
		return c.Core.Check(ent, ce)
	}
	now := c.lim.cfg.Now()
	if !c.scope.allow(ent.Message, now, c.lim.cfg.ScopeEvery) {
		c.lim.suppress(ent.Message)
		return ce
	}
	if !c.lim.allowMessage(ent.Message, now) {
		c.scope.hold(ent.Message, 1)
		return ce
	}
	return ce.AddCore(ent, c)
}

// Write charges the line's bytes to the Limiter and writes it, with the
// count of lines of its message the scope held back since its last one.
func (c *limitedCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	held := c.scope.takeHeld(ent.Message)
	if held > 0 {
		fields = append(fields[:len(fields):len(fields)], zap.Int64("suppressed", held))
	}
	n := c.lim.cfg.Burst + 1
	if buf, err := c.enc.EncodeEntry(ent, fields); err == nil {
		n = buf.Len()
		buf.Free()
	}
	if !c.lim.allowBytes(ent.Message, n, c.lim.cfg.Now()) {
		c.scope.hold(ent.Message, held+1)
		return nil
	}
	return c.Core.Write(ent, fields)
}

// scope is the per-message spacing of one scope's lines.
type scope struct {
	mu   sync.Mutex             // guards last
	last map[string]*scopeEntry // by message
}

type scopeEntry struct {
	at     time.Time // when the last line was let through
	passed bool      // a line was let through at all
	held   int64     // lines held back since the last one written
}

// entryLocked returns msg's entry, creating it while there are fewer than
// maxReasons.
func (s *scope) entryLocked(msg string) *scopeEntry {
	e := s.last[msg]
	if e == nil {
		if len(s.last) >= maxReasons {
			msg = OtherReason
			if e = s.last[msg]; e != nil {
				return e
			}
		}
		e = &scopeEntry{}
		s.last[msg] = e
	}
	return e
}

// allow reports whether a line of msg may pass the scope now: the first
// one does, then one per every. A line held back is counted.
func (s *scope) allow(msg string, now time.Time, every time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entryLocked(msg)
	if e.passed && now.Sub(e.at) < every {
		e.held++
		return false
	}
	e.passed, e.at = true, now
	return true
}

// hold counts n lines of msg the global gates held back.
func (s *scope) hold(msg string, n int64) {
	s.mu.Lock()
	s.entryLocked(msg).held += n
	s.mu.Unlock()
}

// takeHeld returns the lines of msg held back since the last one written
// and starts counting again.
func (s *scope) takeHeld(msg string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entryLocked(msg)
	n := e.held
	e.held = 0
	return n
}
