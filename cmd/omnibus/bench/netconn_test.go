package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// TestCoalescingConnKeepsEveryByteInOrder writes from several goroutines
// (each write whole, as go-amqp's single writer does per frame) and
// checks the peer reads every write, intact and in each writer's order.
func TestCoalescingConnKeepsEveryByteInOrder(t *testing.T) {
	client, server := tcpPair(t)
	c := newCoalescingConn(client)
	const writers, perWriter = 4, 2000
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(server)
		got <- b
	}()
	var mu sync.Mutex // whole writes, like a single writer goroutine
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				line := fmt.Sprintf("w%d-%06d|", w, i)
				mu.Lock()
				_, err := c.Write([]byte(line))
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	b := <-got
	next := make([]int, writers)
	n := 0
	for _, rec := range bytes.Split(bytes.TrimSuffix(b, []byte("|")), []byte("|")) {
		var w, i int
		if _, err := fmt.Sscanf(string(rec), "w%d-%06d", &w, &i); err != nil {
			t.Fatalf("torn record %q", rec)
		}
		if i != next[w] {
			t.Fatalf("writer %d: record %d after %d", w, i, next[w]-1)
		}
		next[w]++
		n++
	}
	if n != writers*perWriter {
		t.Fatalf("peer read %d records, want %d", n, writers*perWriter)
	}
}

// TestCoalescingConnReportsAFailedSocket closes the peer and expects a
// later Write to fail rather than to buffer forever.
func TestCoalescingConnReportsAFailedSocket(t *testing.T) {
	client, server := tcpPair(t)
	c := newCoalescingConn(client)
	defer c.Close()
	server.Close()
	chunk := make([]byte, 64<<10)
	for i := 0; ; i++ {
		if _, err := c.Write(chunk); err != nil {
			return
		}
		if i > 10000 {
			t.Fatal("writes to a closed peer never failed")
		}
	}
}

// TestCoalescingConnWriteAfterClose fails with net.ErrClosed.
func TestCoalescingConnWriteAfterClose(t *testing.T) {
	client, _ := tcpPair(t)
	c := newCoalescingConn(client)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
}

func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}
