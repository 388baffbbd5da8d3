package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/Azure/go-amqp"
)

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago (held open together so that none repeats).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitOpen dials url every millisecond until an AMQP connection opens
// (TCP accepted, SASL and the open exchange done) and returns when it
// did, or the last error once ctx ends.
func waitOpen(ctx context.Context, url, user, pass string) (time.Time, error) {
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		opts := &amqp.ConnOptions{}
		if user != "" {
			opts.SASLType = amqp.SASLTypePlain(user, pass)
		}
		conn, err := amqp.Dial(attempt, url, opts)
		cancel()
		if err == nil {
			at := time.Now()
			conn.Close()
			return at, nil
		}
		last = err
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return time.Time{}, fmt.Errorf("no AMQP open on %s: %w", url, last)
		case <-t.C:
		}
	}
}
