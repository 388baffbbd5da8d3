package console

import (
	"fmt"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestLoginBackoffDoubles: a few failures are free, then each failure in
// a row doubles the wait, up to the bound; a try during the wait is
// refused and does not count; a success clears the record; other clients
// are not held up.
func TestLoginBackoffDoubles(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	th := newLoginThrottle(clk.now)
	const a, b = "192.0.2.1:1000", "192.0.2.2:1000"
	for i := range loginFreeFailures {
		if w := th.admit(a); w != 0 {
			t.Fatalf("free try %d: wait %v", i+1, w)
		}
	}
	want := loginBackoffBase
	for i := 0; i < 8; i++ {
		if w := th.admit(a); w != 0 {
			t.Fatalf("after waiting: wait %v", w)
		}
		if w := th.admit(a); w != want {
			t.Fatalf("after %d failures: wait %v, want %v", loginFreeFailures+i+1, w, want)
		}
		clk.advance(want - time.Millisecond)
		if w := th.admit(a); w != time.Millisecond {
			t.Fatalf("a try during the wait: wait %v, want 1ms (tries during it must not count)", w)
		}
		if w := th.admit(b); w != 0 {
			t.Fatalf("another client is held up: %v", w)
		}
		th.succeeded(b)
		clk.advance(time.Millisecond)
		want = min(2*want, loginBackoffMax)
	}
	if want != loginBackoffMax {
		t.Fatalf("the wait never reached its bound: %v", want)
	}
	th.succeeded(a)
	for i := range loginFreeFailures + 1 {
		if w := th.admit(a); w != 0 {
			t.Fatalf("after a success, try %d: wait %v", i+1, w)
		}
	}
	// A client quiet long enough starts afresh.
	clk.advance(loginForgetAfter)
	for i := range loginFreeFailures + 1 {
		if w := th.admit(a); w != 0 {
			t.Fatalf("after %v of quiet, try %d: wait %v", loginForgetAfter, i+1, w)
		}
	}
}

// TestLoginThrottleConcurrentTries: tries arriving together are counted
// as they are let in, so only the free ones get through before the first
// answer.
func TestLoginThrottleConcurrentTries(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	th := newLoginThrottle(clk.now)
	heard := 0
	for range 100 {
		if th.admit("192.0.2.1:1") == 0 {
			heard++
		}
	}
	if heard != loginFreeFailures+1 {
		t.Fatalf("%d of 100 simultaneous tries heard, want %d", heard, loginFreeFailures+1)
	}
}

// TestLoginThrottleBounded: guessing from ever new addresses fills the
// table to its bound, then every new address shares one record, which
// backs off like any other; IPv6 addresses of one /64 are one client.
func TestLoginThrottleBounded(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	th := newLoginThrottle(clk.now)
	for i := range loginMaxClients + 1000 {
		th.admit(fmt.Sprintf("[2001:db8:%x::1]:443", i))
	}
	if n := th.remembered(); n != loginMaxClients+1 {
		t.Fatalf("%d clients remembered, want the bound %d and the shared record", n, loginMaxClients)
	}
	// The addresses past the bound shared one record: a new one waits.
	if w := th.admit("[2001:db8:ffff:1::1]:443"); w == 0 {
		t.Fatal("a new address past the bound was heard although the shared record is backing off")
	}
	if w := th.admit("[2001:db8:0:0:ffff::2]:443"); w != 0 {
		t.Fatalf("another address of a /64 on record, with one failure: wait %v", w)
	}
	// Quiet records are forgotten, and the table is usable again.
	clk.advance(loginForgetAfter)
	if w := th.admit("198.51.100.7:1"); w != 0 {
		t.Fatalf("after the records were forgotten: wait %v", w)
	}
	if n := th.remembered(); n != 1 {
		t.Fatalf("%d clients remembered after all went quiet, want 1", n)
	}
}
