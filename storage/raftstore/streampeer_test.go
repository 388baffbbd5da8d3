package raftstore

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// The pieces the transport tests and BenchmarkTransport share: a transport
// on a loopback port, a node that only counts what it receives, and a
// stream opened by hand.

// testCA is the CA of the transport tests' nodes.
var testCA = sync.OnceValues(func() (*peertls.CA, error) { return peertls.NewCA(time.Now()) })

// testCreds issues node id's credentials from testCA.
func testCreds(tb testing.TB, id uint64) *peertls.Creds {
	tb.Helper()
	ca, err := testCA()
	if err != nil {
		tb.Fatal(err)
	}
	return newTestCreds(tb, ca, id)
}

// tlsSecurity is node id's peer security with mutual TLS (testCA) and the
// test admin key.
func tlsSecurity(tb testing.TB, id uint64) peerSecurity {
	return peerSecurity{creds: testCreds(tb, id), admin: testAdmin}
}

// startTestTransport starts a transport for node id on a loopback port,
// with mutual TLS, closed when the test ends. log may be nil.
func startTestTransport(tb testing.TB, id uint64, h handler, log *zap.Logger) *httpTransport {
	tb.Helper()
	return startTransportWith(tb, id, h, tlsSecurity(tb, id), log)
}

// startTransportWith starts a transport with sec (peerSecurity{}: plain
// TCP) on a loopback port.
func startTransportWith(tb testing.TB, id uint64, h handler, sec peerSecurity, log *zap.Logger) *httpTransport {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return startTransportOn(tb, id, h, ln, sec, log)
}

func startTransportOn(tb testing.TB, id uint64, h handler, ln net.Listener, sec peerSecurity, log *zap.Logger) *httpTransport {
	tb.Helper()
	if log == nil {
		log = zap.NewNop()
	}
	t := newHTTPTransport(id, "", ln, sec, log)
	if err := t.start(h); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { t.close() })
	return t
}

// countingHandler is a node that only counts what it receives; tokens,
// when it has any, bound the messages in flight to it. When holdApps is
// set, a frame of appends waits in receive until it is closed: the node
// stops reading that stream.
type countingHandler struct {
	tokens       chan struct{}
	holdApps     chan struct{}
	received     atomic.Int64
	marked       atomic.Int64 // messages of term markedTerm: those a test forged
	apps         atomic.Int64
	unreachables atomic.Int64
	gones        atomic.Int64
	lead         atomic.Uint64 // the leader it follows
	snapshots    atomic.Int64  // snapshots delivered
	scratch      string        // where snapshots in transit go ("": none)
}

func newCountingHandler(window int) *countingHandler {
	h := &countingHandler{tokens: make(chan struct{}, max(window, 1))}
	for range window {
		h.tokens <- struct{}{}
	}
	return h
}

// await takes a token: waits until fewer than window messages are in
// flight.
func (h *countingHandler) await(tb testing.TB) {
	select {
	case <-h.tokens:
	case <-time.After(time.Minute):
		tb.Fatalf("no message arrived for a minute (%d received)", h.received.Load())
	}
}

// drain waits until every message in flight has arrived.
func (h *countingHandler) drain(tb testing.TB, window int) {
	for range window {
		h.await(tb)
	}
	for range window {
		h.tokens <- struct{}{}
	}
}

// markedTerm marks the messages a test forges, so that it can tell them
// from the good stream's heartbeats, which may still be arriving.
const markedTerm = 99

func (h *countingHandler) receive(f *frame) bool {
	for _, m := range f.msgs {
		if m.Type == pb.MsgApp {
			if h.holdApps != nil {
				<-h.holdApps
			}
			h.apps.Add(1)
		}
		h.received.Add(1)
		if m.Term == markedTerm {
			h.marked.Add(1)
		}
		select {
		case h.tokens <- struct{}{}:
		default:
		}
	}
	return true
}

func (h *countingHandler) receiveSnapshot(_ uint64, _ pb.Message, dir string) error {
	h.snapshots.Add(1)
	return os.RemoveAll(dir)
}
func (h *countingHandler) newScratch(_ uint64, kind string) (string, error) {
	if h.scratch == "" {
		return "", errors.New("no scratch")
	}
	return os.MkdirTemp(h.scratch, snapScratchPrefix+kind+"-")
}
func (h *countingHandler) following(uint64) uint64      { return h.lead.Load() }
func (h *countingHandler) stamp(f *frame)               { f.sent = time.Now().UnixNano() }
func (h *countingHandler) unreachable(uint64)           { h.unreachables.Add(1) }
func (h *countingHandler) gone(uint64)                  { h.gones.Add(1) }
func (h *countingHandler) status(uint64) (Status, bool) { return Status{ID: 2}, true }
func (h *countingHandler) changeMembers(context.Context, MemberChange) error {
	return errors.New("no members here")
}

// openRawStream opens a stream to the transport at addr by hand, as peer
// from on lane (with from's certificate), and returns the connection once
// upgraded.
func openRawStream(tb testing.TB, addr string, from, to uint64, lane string) (net.Conn, *bufio.Reader) {
	tb.Helper()
	conn, br, resp := requestStream(tb, addr, testCreds(tb, from), from, to, lane)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		tb.Fatalf("stream request answered %s", resp.Status)
	}
	return conn, br
}

// requestStream asks the transport at addr for a stream, presenting creds
// (nil: plain TCP) and claiming to be from, and returns its answer.
func requestStream(tb testing.TB, addr string, creds *peertls.Creds, from, to uint64, lane string) (net.Conn, *bufio.Reader, *http.Response) {
	tb.Helper()
	var conn net.Conn
	var err error
	scheme := "http"
	if creds != nil {
		scheme = "https"
		cfg := creds.ClientConfig(to)
		cfg.NextProtos = []string{"http/1.1"}
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	} else {
		conn, err = net.DialTimeout("tcp", addr, 10*time.Second)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+pathStream+"?lane="+lane, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", streamProtocol)
	req.Header.Set(headerFrom, strconv.FormatUint(from, 10))
	req.Header.Set(headerTo, strconv.FormatUint(to, 10))
	if err := req.Write(conn); err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		tb.Fatal(err)
	}
	return conn, br, resp
}

// awaitClosed reads conn (skipping the keepalives) until the other end
// closes it, failing the test if it is still open after a minute.
func awaitClosed(tb testing.TB, conn net.Conn, br *bufio.Reader) {
	tb.Helper()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	for {
		b, err := br.ReadByte()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				tb.Fatal("the stream is still open after a minute")
			}
			return
		}
		if b != 0 {
			tb.Fatalf("the receiver wrote %#x, not a keepalive", b)
		}
	}
}

// frameBytes is f as a stream carries it: length, then the frame.
func frameBytes(tb testing.TB, f *frame) []byte {
	tb.Helper()
	b, err := appendFrame([]byte{0, 0, 0, 0}, f)
	if err != nil {
		tb.Fatal(err)
	}
	n := len(b) - 4
	b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return b
}
