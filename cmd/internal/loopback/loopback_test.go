package loopback

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrIsBelowTheEphemeralRange: the address is on loopback, free
// (a listener binds it), and its port below the range outgoing
// connections take their ports from.
func TestFreeAddrIsBelowTheEphemeralRange(t *testing.T) {
	lo := ephemeralPortsFrom()
	for range 20 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		host, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if host != "127.0.0.1" || port < 10000 || port >= lo {
			t.Fatalf("%s: want 127.0.0.1 and a port in [10000, %d)", addr, lo)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		l.Close()
	}
}
