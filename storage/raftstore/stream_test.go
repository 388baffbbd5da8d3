package raftstore

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The peer streams over real sockets: what a peer that stops reading, goes
// silent, restarts, or sends garbage does to them.

func heartbeat(from, to uint64) pb.Message {
	return pb.Message{Type: pb.MsgHeartbeat, From: from, To: to, Term: 1}
}

func bigAppend(from, to uint64, bytes int) pb.Message {
	return pb.Message{Type: pb.MsgApp, From: from, To: to, Term: 1,
		Entries: []pb.Entry{{Term: 1, Index: 1, Data: make([]byte, bytes)}}}
}

// sendUntil sends m to peer to until cond holds (messages sent while the
// peer cannot be reached are dropped, as raft expects).
func sendUntil(tb testing.TB, tr *httpTransport, to uint64, m pb.Message, what string, cond func() bool) {
	tb.Helper()
	waitFor(tb, what, func() bool {
		if cond() {
			return true
		}
		tr.send(0, to, []pb.Message{m})
		return false
	})
}

// A peer that stops reading its appends stream holds up neither its
// heartbeats (their own connection) nor the sender for long: the write
// times out, raft hears the peer is unreachable, and once the peer reads
// again appends flow on a new stream.
func TestStreamStuckAppendsDoNotDelayHeartbeats(t *testing.T) {
	h1, h2 := newCountingHandler(0), newCountingHandler(0)
	hold := make(chan struct{})
	h2.holdApps = hold
	t1, t2 := startTestTransport(t, 1, h1, nil), startTestTransport(t, 2, h2, nil)
	released := false
	t.Cleanup(func() {
		if !released {
			close(hold) // before the transports close, which waits for the reader
		}
	})
	t1.setPeer(0, 2, t2.addr())

	// 100 appends of 256 KiB: 25 MiB, more than the sockets' buffers take.
	for range 100 {
		t1.send(0, 2, []pb.Message{bigAppend(1, 2, 256<<10)})
	}
	waitFor(t, "the appends writer to time out", func() bool { return h1.unreachables.Load() > 0 })
	if h2.apps.Load() != 0 {
		t.Fatalf("%d appends were delivered while the node held them", h2.apps.Load())
	}
	before := h2.received.Load()
	sendUntil(t, t1, 2, heartbeat(1, 2), "heartbeats past the stuck appends", func() bool { return h2.received.Load() >= before+5 })

	close(hold)
	released = true
	waitFor(t, "the held appends", func() bool { return h2.apps.Load() > 0 })
	apps := h2.apps.Load()
	sendUntil(t, t1, 2, bigAppend(1, 2, 1<<10), "appends on a new stream", func() bool { return h2.apps.Load() > apps })
}

// A peer whose connection goes silent (cut without a reset, or the peer
// frozen) is found by the missing keepalives: the sender closes the
// stream, tells raft, and dials again.
func TestStreamSilentPeerIsLeft(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln = tls.NewListener(ln, testCreds(t, 2).ServerConfig(nil))
	var accepted atomic.Int64
	conns := make(chan net.Conn, 16)
	go func() { // upgrades every stream, then neither reads nor writes
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
				conn.Close()
				continue
			}
			io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+streamProtocol+"\r\n\r\n")
			accepted.Add(1)
			conns <- conn
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for {
			select {
			case c := <-conns:
				c.Close()
			default:
				return
			}
		}
	})
	h1 := newCountingHandler(0)
	t1 := startTestTransport(t, 1, h1, nil)
	t1.setPeer(0, 2, ln.Addr().String())
	t1.send(0, 2, []pb.Message{heartbeat(1, 2)})
	waitFor(t, "a stream", func() bool { return accepted.Load() >= 1 })
	waitFor(t, "the silent stream to be dropped and dialled again", func() bool { return accepted.Load() >= 2 })
	if h1.unreachables.Load() == 0 {
		t.Fatal("the silent stream was dropped without telling raft")
	}
	if h1.gones.Load() != 0 {
		t.Fatal("a silent peer was taken for a dead process")
	}
}

// A node that went away is reported gone (its port refuses), and once it
// is back on the same address, messages reach it again.
func TestStreamReconnectsAfterThePeerRestarts(t *testing.T) {
	h1, h2 := newCountingHandler(0), newCountingHandler(0)
	t1, t2 := startTestTransport(t, 1, h1, nil), startTestTransport(t, 2, h2, nil)
	addr := t2.addr()
	t1.setPeer(0, 2, addr)
	sendUntil(t, t1, 2, heartbeat(1, 2), "a first heartbeat", func() bool { return h2.received.Load() > 0 })

	if err := t2.close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the peer to be reported gone", func() bool { return h1.gones.Load() > 0 })

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	h2b := newCountingHandler(0)
	startTransportOn(t, 2, h2b, ln, tlsSecurity(t, 2), nil)
	sendUntil(t, t1, 2, heartbeat(1, 2), "a heartbeat to the restarted peer", func() bool { return h2b.received.Load() > 0 })
}

// A bad frame, an oversized one, or one that lies about its sender closes
// that stream only: the other streams to the node keep delivering.
func TestStreamBadFrameClosesOnlyThatStream(t *testing.T) {
	h1, h2 := newCountingHandler(0), newCountingHandler(0)
	t1, t2 := startTestTransport(t, 1, h1, nil), startTestTransport(t, 2, h2, nil)
	t1.setPeer(0, 2, t2.addr())
	sendUntil(t, t1, 2, heartbeat(1, 2), "a first heartbeat", func() bool { return h2.received.Load() > 0 })

	oversized := binary.BigEndian.AppendUint32(nil, maxFrameBytes+1)
	// The forged messages carry markedTerm: heartbeats the good stream sent
	// before a subtest may still arrive during it, so the count of every
	// message received cannot tell whether a bad one got through.
	marked := func(from, to uint64) pb.Message { m := heartbeat(from, to); m.Term = markedTerm; return m }
	forged := frameBytes(t, &frame{from: 1, to: 2, msgs: []pb.Message{marked(1, 2)}}) // on peer 9's stream
	wrongNode := frameBytes(t, &frame{from: 9, to: 3, msgs: []pb.Message{marked(9, 3)}})
	for name, b := range map[string][]byte{
		"garbage":    append(binary.BigEndian.AppendUint32(nil, 5), "junk!"...),
		"oversized":  oversized,
		"forged":     forged,
		"wrong node": wrongNode,
	} {
		t.Run(name, func(t *testing.T) {
			got := h2.received.Load()
			conn, br := openRawStream(t, t2.addr(), 9, 2, laneCtl)
			if _, err := conn.Write(b); err != nil {
				t.Fatal(err)
			}
			awaitClosed(t, conn, br)
			if n := h2.marked.Load(); n != 0 {
				t.Fatalf("%d of the bad streams' messages were delivered", n)
			}
			sendUntil(t, t1, 2, heartbeat(1, 2), "a heartbeat on the good stream", func() bool { return h2.received.Load() > got })
		})
	}
	if n := h1.unreachables.Load(); n != 0 {
		t.Fatalf("the good stream broke %d times", n)
	}
}

// A stream from a peer replaces that peer's previous stream on the lane
// (it redialled: the old one is dead), so a peer holds one per lane.
func TestStreamReplacesThePeersPreviousOne(t *testing.T) {
	t2 := startTestTransport(t, 2, newCountingHandler(0), nil)
	old, oldBr := openRawStream(t, t2.addr(), 9, 2, laneApp)
	openRawStream(t, t2.addr(), 9, 2, laneCtl) // another lane: kept
	openRawStream(t, t2.addr(), 9, 2, laneApp)
	awaitClosed(t, old, oldBr)
	t2.mu.Lock()
	n := len(t2.inbound)
	t2.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d inbound streams, want 2", n)
	}
}

// A peer that opens a stream and then says nothing (no frame, no ping) is
// dropped after stallTimeout; until then it gets keepalives.
func TestStreamSilentSenderIsDropped(t *testing.T) {
	t2 := startTestTransport(t, 2, newCountingHandler(0), nil)
	conn, br := openRawStream(t, t2.addr(), 9, 2, laneApp)
	b, err := br.ReadByte()
	if err != nil || b != 0 {
		t.Fatalf("first byte from the receiver: %#x, %v; want a keepalive", b, err)
	}
	awaitClosed(t, conn, br)
}

// A stream request without the upgrade (curl, or an HTTP/2 client) gets
// 426 and where to go; the status stays plain HTTP/1.1 or HTTP/2.
func TestStreamNeedsTheUpgrade(t *testing.T) {
	for _, secure := range []bool{true, false} {
		t.Run(fmt.Sprintf("tls=%v", secure), func(t *testing.T) {
			sec := peerSecurity{}
			if secure {
				sec = tlsSecurity(t, 2)
			}
			t2 := startTransportWith(t, 2, newCountingHandler(0), sec, nil)
			req, _ := http.NewRequest(http.MethodGet, sec.scheme()+"://"+t2.addr()+pathStream+"?lane=ctl", nil)
			req.Header.Set(headerFrom, "1")
			req.Header.Set(headerTo, "2")
			var h1 *http.Client
			if secure {
				h1 = &http.Client{Transport: &http.Transport{TLSClientConfig: testCreds(t, 1).ClientConfig(2)}}
			} else {
				h1 = http.DefaultClient
			}
			resp, err := h1.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUpgradeRequired || resp.Header.Get("Upgrade") != streamProtocol {
				t.Fatalf("stream without upgrade: %s, Upgrade %q", resp.Status, resp.Header.Get("Upgrade"))
			}
			src := peerSecurity{}
			if secure {
				src = tlsSecurity(t, 1)
			}
			resp, err = src.newSnapshotClient(2).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusUpgradeRequired {
				t.Fatalf("stream over HTTP/2: %s %s", resp.Proto, resp.Status)
			}
			st, err := NewClient(src.creds, nil).Status(t.Context(), t2.addr())
			if err != nil || st.ID != 2 {
				t.Fatalf("status: %+v, %v", st, err)
			}
		})
	}
}

// A node older than the streams (HTTP/2 POST streams) answers the upgrade
// with 405: the peer is unreachable, not gone, and the log says why once.
func TestStreamRefusedByAnOlderNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathStream, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	old := &http.Server{Handler: mux, Protocols: new(http.Protocols)}
	old.Protocols.SetHTTP1(true)
	old.Protocols.SetUnencryptedHTTP2(true)
	go old.Serve(ln)
	t.Cleanup(func() { old.Close() })

	core, logs := observer.New(zapcore.WarnLevel)
	h1 := newCountingHandler(0)
	t1 := startTransportWith(t, 1, h1, peerSecurity{}, zap.New(core)) // the older node had no TLS
	t1.setPeer(0, 2, ln.Addr().String())
	sendUntil(t, t1, 2, heartbeat(1, 2), "three refusals", func() bool { return h1.unreachables.Load() >= 3 })
	if h1.gones.Load() != 0 {
		t.Fatal("a refusal was taken for a dead process")
	}
	warned := logs.FilterMessage("peer refused a stream").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings for the same refusal, want 1", len(warned))
	}
	if msg := warned[0].ContextMap()["error"]; !strings.Contains(msg.(string), "405") || !strings.Contains(msg.(string), "older omnibus") {
		t.Fatalf("the warning says %q", msg)
	}
}
