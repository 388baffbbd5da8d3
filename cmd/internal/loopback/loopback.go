// Package loopback picks loopback ports for processes that tests and test
// tools start, stop and start again on the same address.
package loopback

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreeAddr returns a loopback address (127.0.0.1:port) nothing listened on
// a moment ago, for a listener that binds it later, maybe many times.
//
// The port is picked below the kernel's ephemeral range. A port the kernel
// hands out for bind(":0") is as likely to be handed to the next outgoing
// connection of any process running meanwhile (every package's tests run
// at once under `go test ./...`), which then holds it when the listener
// binds it, or binds it again after a restart: "address already in use",
// seen in CI. Below the range only an explicit bind can take it, and the
// random pick makes two callers' picks meet rarely; each pick is checked
// by binding it.
func FreeAddr() (string, error) {
	lo := ephemeralPortsFrom()
	for range 100 {
		port := 10000 + rand.IntN(lo-10000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", errors.New("loopback: no free port below the ephemeral range in 100 picks")
}

// FreePort is FreeAddr's port alone.
func FreePort() (string, error) {
	addr, err := FreeAddr()
	if err != nil {
		return "", err
	}
	_, port, err := net.SplitHostPort(addr)
	return port, err
}

// ephemeralPortsFrom is the first port of the kernel's ephemeral range
// (Linux's default 32768 when it cannot be read or leaves too little room
// below it).
func ephemeralPortsFrom() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return linuxDefault
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo < 12000 {
		return linuxDefault
	}
	return lo
}
