package console

import (
	"container/list"
	"net/netip"
	"sync"
	"time"
)

// Bounds of the login throttle. The first loginFreeFailures failed
// logins in a row from one client cost nothing (typos); after n > that,
// its next login is refused unheard until
// loginBackoffBase·2^(n-loginFreeFailures-1), at most loginBackoffMax,
// after the last failure: a guesser gets about two tries a minute. A
// client quiet for loginForgetAfter since its last failure starts
// afresh.
const (
	loginFreeFailures = 3
	loginBackoffBase  = time.Second
	loginBackoffMax   = 30 * time.Second
	loginForgetAfter  = 15 * time.Minute
	// loginMaxClients bounds the clients the throttle remembers (a hundred
	// bytes or so each). When the table is full, new clients share one
	// more entry (overflowKey), so that
	// guessing from ever new addresses neither grows the table nor starts
	// each address afresh.
	loginMaxClients = 4096
)

// overflowKey is the entry every client shares while the table is full.
var overflowKey = netip.MustParsePrefix("::/0")

// loginThrottle slows down guessing a key through the login endpoint:
// exponential backoff per client address (an IPv6 client per /64, the
// block one host usually holds). An attempt counts as a failure from the
// moment it is let in until [loginThrottle.succeeded] clears the client's
// record, so attempts sent at once cannot all slip in before the first
// one fails.
type loginThrottle struct {
	now func() time.Time

	mu struct {
		sync.Mutex                                // guards the fields below
		clients    map[netip.Prefix]*list.Element // of *loginFailures
		order      list.List                      // of *loginFailures, least recently failed first
	}
}

// loginFailures is one client's record of failed logins.
type loginFailures struct {
	key   netip.Prefix
	count int       // failures in a row
	last  time.Time // of the last failure
}

func newLoginThrottle(now func() time.Time) *loginThrottle {
	t := &loginThrottle{now: now}
	t.mu.clients = make(map[netip.Prefix]*list.Element)
	return t
}

// clientKey is the throttle's key for a peer address ("ip:port"): the
// IPv4 address, or the IPv6 address's /64. An address that does not parse
// shares the overflow entry.
func clientKey(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return overflowKey
	}
	ip := ap.Addr().Unmap().WithZone("")
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// admit returns how long the client must still wait before a login of
// its is heard, or 0 when it may try now; the try is then counted as a
// failure.
func (t *loginThrottle) admit(remoteAddr string) time.Duration {
	key := clientKey(remoteAddr)
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetLocked(now)
	e, ok := t.mu.clients[key]
	if !ok && len(t.mu.clients) >= loginMaxClients {
		key = overflowKey
		e, ok = t.mu.clients[key]
	}
	if !ok {
		e = t.mu.order.PushBack(&loginFailures{key: key})
		t.mu.clients[key] = e
	}
	f := e.Value.(*loginFailures)
	if left := f.last.Add(backoff(f.count)).Sub(now); left > 0 {
		return left
	}
	f.count++
	f.last = now
	t.mu.order.MoveToBack(e)
	return 0
}

// succeeded clears the client's record: its login was right.
func (t *loginThrottle) succeeded(remoteAddr string) {
	key := clientKey(remoteAddr)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.mu.clients[key]; ok && key != overflowKey {
		t.mu.order.Remove(e)
		delete(t.mu.clients, key)
	}
}

// forgetLocked drops the records of clients quiet for loginForgetAfter
// (oldest first, so it stops at the first recent one).
func (t *loginThrottle) forgetLocked(now time.Time) {
	for e := t.mu.order.Front(); e != nil; e = t.mu.order.Front() {
		f := e.Value.(*loginFailures)
		if now.Sub(f.last) < loginForgetAfter {
			return
		}
		t.mu.order.Remove(e)
		delete(t.mu.clients, f.key)
	}
}

// remembered reports the clients on record (for tests).
func (t *loginThrottle) remembered() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.clients)
}

// backoff is the wait after n failures in a row.
func backoff(n int) time.Duration {
	if n <= loginFreeFailures {
		return 0
	}
	d := loginBackoffBase
	for i := loginFreeFailures + 1; i < n && d < loginBackoffMax; i++ {
		d *= 2
	}
	return min(d, loginBackoffMax)
}
