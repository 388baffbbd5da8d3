package app

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"
)

// protectedLogGap spaces the log lines about refused peers, so a scan of
// the port cannot flood the log.
const protectedLogGap = 10 * time.Second

// protection is protected mode, after Redis's: while omnibus runs with the
// publicly known emulator key ([DefaultKey]), anyone who can reach it
// could use it, so only peers on this machine (loopback) are served unless
// a key of one's own is set or [Options.AllowRemote] opens it.
type protection struct {
	on       bool
	refusals *refusalLog
}

func newProtection(o Options) *protection {
	return &protection{on: o.Key == DefaultKey && !o.AllowRemote,
		refusals: newRefusalLog(o.Logger, "protected mode refused a remote client; set --key or --allow-remote to serve other machines")}
}

// protectedError is the refusal of a peer: its text tells the user what
// happened and how to open omnibus to other machines.
type protectedError struct{ peer string }

func (e *protectedError) Error() string {
	return "omnibus is in protected mode: it runs with the publicly known emulator key, so it serves only " +
		"clients on its own machine (loopback), and this connection came from " + e.peer + ". " +
		"To serve other machines, set a key of your own (--key or OMNIBUS_KEY) " +
		"or allow remote clients (--allow-remote or OMNIBUS_ALLOW_REMOTE=true)"
}

// admit returns nil for a peer protected mode lets in: every peer when it
// is off, a loopback one (127.0.0.0/8, ::1, or either mapped into IPv6)
// when it is on.
func (p *protection) admit(peer net.Addr) error {
	if !p.on || isLoopback(peer) {
		return nil
	}
	p.noteRefusal(peer)
	return &protectedError{peer: hostOf(peer)}
}

// noteRefusal logs a refusal, at most one line per protectedLogGap.
func (p *protection) noteRefusal(peer net.Addr) {
	p.refusals.note(zap.String("peer", hostOf(peer)))
}

// refusalLog logs refusals of one kind as warnings, at most one line per
// protectedLogGap, each with the number refused since the last: whoever
// is refused cannot flood the log.
type refusalLog struct {
	log *zap.Logger
	msg string

	mu struct {
		sync.Mutex           // guards the fields below
		refused    int       // refusals since the last log line
		loggedAt   time.Time // when the last line was written
	}
}

func newRefusalLog(log *zap.Logger, msg string) *refusalLog {
	if log == nil {
		log = zap.NewNop()
	}
	return &refusalLog{log: log, msg: msg}
}

// note counts a refusal and logs it with fields, unless a line was
// written less than protectedLogGap ago.
func (l *refusalLog) note(fields ...zap.Field) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.refused++
	if now := time.Now(); now.Sub(l.mu.loggedAt) >= protectedLogGap {
		l.log.Warn(l.msg, append(fields, zap.Int("refused", l.mu.refused))...)
		l.mu.loggedAt, l.mu.refused = now, 0
	}
}

// isLoopback reports whether addr is a loopback IP address, IPv4-mapped
// IPv6 included.
func isLoopback(addr net.Addr) bool {
	ip := ipOf(addr)
	return ip.IsValid() && ip.Unmap().IsLoopback()
}

// ipOf returns addr's IP, or the zero Addr when it has none.
func ipOf(addr net.Addr) netip.Addr {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr()
	case nil:
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// hostOf names addr's host for messages.
func hostOf(addr net.Addr) string {
	if ip := ipOf(addr); ip.IsValid() {
		return ip.Unmap().String()
	}
	if addr == nil {
		return "an unknown address"
	}
	return addr.String()
}

// describe is the start-up line of protected mode, or "" when it is off.
func (p *protection) describe() string {
	if !p.on {
		return ""
	}
	return fmt.Sprintf("protected mode: the publicly known emulator key (%s) is in use, so only clients on this machine "+
		"(loopback) are served; set a key of your own (--key, OMNIBUS_KEY) or --allow-remote (OMNIBUS_ALLOW_REMOTE=true) "+
		"to serve other machines", DefaultKey)
}
