package raftstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// The peer transport is HTTP/2 over plain TCP (h2c, prior knowledge),
// served and dialled by net/http: each node keeps two long POST streams
// to each peer and writes length-prefixed frames into their bodies; the
// peer reads them as they come. Appends (MsgApp, which can carry
// megabytes) go on one stream, everything else (heartbeats, votes,
// acknowledgements) on the other, each over its own TCP connection, so
// that a large append never delays a heartbeat (HTTP/2 interleaving on one
// connection is not enough: the heartbeat still queues behind the append's
// bytes in the socket). Snapshots go as their own POST, on the appends'
// connection.

// Timeouts of the peer transport.
const (
	dialTimeout  = time.Second
	writeTimeout = 2 * time.Second // one frame into a stream (plus a second per MiB)
	pingAfter    = time.Second     // an idle connection is pinged...
	// ...and closed if the ping is not answered within stallTimeout, nor
	// any byte written for that long. A ping waits behind the appends
	// already on the connection (up to the HTTP/2 windows, a few MiB):
	// at a one-second limit, a loaded machine dropped the connection in
	// the middle of every 12 MiB append, which was then never committed.
	stallTimeout = 5 * time.Second
	redialAfter  = 100 * time.Millisecond
	maxRedial    = time.Second
)

// Paths and headers of the peer API.
const (
	pathStream   = "/raft/stream"
	pathSnapshot = "/raft/snapshot"
	pathStatus   = "/raft/status"
	pathMembers  = "/raft/members"
	headerFrom   = "Omnibus-Raft-From"
	headerTo     = "Omnibus-Raft-To"
)

type httpTransport struct {
	id         uint64
	listenAddr string
	log        *zap.Logger
	client     *http.Client // appends and snapshots
	ctlClient  *http.Client // everything else: heartbeats, votes, acknowledgements
	srv        *http.Server
	ln         net.Listener
	h          handler

	mu      sync.Mutex // guards the fields below
	peers   map[uint64]*peer
	closed  bool
	snapOut map[uint64]bool // peers with a snapshot being sent
	snapIn  bool            // a snapshot is being received
	wg      sync.WaitGroup  // peer senders and snapshot senders
}

func newHTTPTransport(id uint64, listen string, ln net.Listener, log *zap.Logger) *httpTransport {
	return &httpTransport{id: id, listenAddr: listen, ln: ln, log: log, client: newPeerClient(), ctlClient: newPeerClient(),
		peers: map[uint64]*peer{}, snapOut: map[uint64]bool{}}
}

// newPeerClient is an HTTP/2 (h2c) client with its own connections. The
// control lane has a client of its own: on one TCP connection shared with
// appends, a heartbeat waited in the socket's send buffer behind megabytes
// of a large append, and on a slow or loaded link every echo came back
// older than the lease: the leader could never serve, and, heartbeats
// flowing, no one else was elected.
func newPeerClient() *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: dialTimeout, KeepAlive: 10 * time.Second}).DialContext,
		Protocols:           new(http.Protocols),
		HTTP2:               &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: stallTimeout, WriteByteTimeout: stallTimeout},
		MaxIdleConnsPerHost: 4,
	}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

func (t *httpTransport) start(h handler) error {
	t.h = h
	ln := t.ln
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", t.listenAddr); err != nil {
			return fmt.Errorf("raftstore: peer listener: %w", err)
		}
		t.ln = ln
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathStream, t.serveStream)
	mux.HandleFunc("POST "+pathSnapshot, t.serveSnapshot)
	mux.HandleFunc("GET "+pathStatus, t.serveStatus)
	mux.HandleFunc("POST "+pathMembers, t.serveMembers)
	t.srv = &http.Server{Handler: mux, Protocols: new(http.Protocols), ReadHeaderTimeout: 5 * time.Second,
		HTTP2:    &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: stallTimeout, WriteByteTimeout: stallTimeout, MaxReadFrameSize: 1 << 20},
		ErrorLog: zap.NewStdLog(t.log.Named("http"))}
	t.srv.Protocols.SetHTTP1(true) // status for curl
	t.srv.Protocols.SetUnencryptedHTTP2(true)
	go func() {
		if err := t.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.log.Error("peer listener stopped", zap.Error(err))
		}
	}()
	return nil
}

func (t *httpTransport) addr() string {
	if t.ln == nil {
		return t.listenAddr
	}
	return t.ln.Addr().String()
}

func (t *httpTransport) setPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if p, ok := t.peers[id]; ok {
		p.setAddr(addr)
		return
	}
	p := &peer{t: t, id: id, addr: addr, stop: make(chan struct{})}
	p.app = &lane{p: p, name: "app", q: make(chan pb.Message, sendQueueLen)}
	p.ctl = &lane{p: p, name: "ctl", q: make(chan pb.Message, sendQueueLen)}
	t.peers[id] = p
	t.wg.Go(p.app.run)
	t.wg.Go(p.ctl.run)
}

func (t *httpTransport) removePeer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.peers[id]; ok {
		close(p.stop)
		delete(t.peers, id)
	}
}

func (t *httpTransport) send(to uint64, msgs []pb.Message) {
	t.mu.Lock()
	p := t.peers[to]
	t.mu.Unlock()
	if p == nil {
		return
	}
	for _, m := range msgs {
		l := p.ctl
		if m.Type == pb.MsgApp {
			l = p.app
		}
		select {
		case l.q <- m:
		default:
			t.h.unreachable(to) // raft re-sends
		}
	}
}

func (t *httpTransport) close() error {
	t.mu.Lock()
	t.closed = true
	for id, p := range t.peers {
		close(p.stop)
		delete(t.peers, id)
	}
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := t.srv.Shutdown(ctx)
	if err != nil {
		err = t.srv.Close()
	}
	t.wg.Wait()
	t.client.CloseIdleConnections()
	t.ctlClient.CloseIdleConnections()
	return err
}

// serveStream reads a peer's frames until the stream ends.
func (t *httpTransport) serveStream(w http.ResponseWriter, r *http.Request) {
	from, err := t.checkHeaders(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	br := bufio.NewReaderSize(r.Body, 64<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxFrameBytes {
			t.log.Warn("peer sent an oversized frame; closing its stream", zap.Uint64("peer", from), zap.Uint32("bytes", n))
			return
		}
		data := make([]byte, n) // messages keep pointing into it
		if _, err := io.ReadFull(br, data); err != nil {
			return
		}
		f, err := parseFrame(data)
		if err != nil || f.from != from || f.to != t.id {
			t.log.Warn("bad frame from a peer; closing its stream", zap.Uint64("peer", from), zap.Error(err))
			return
		}
		if !t.h.receive(f) {
			return
		}
	}
}

// checkHeaders returns the sender's id, checking the request is for us.
func (t *httpTransport) checkHeaders(r *http.Request) (uint64, error) {
	from, err1 := strconv.ParseUint(r.Header.Get(headerFrom), 10, 64)
	to, err2 := strconv.ParseUint(r.Header.Get(headerTo), 10, 64)
	if err1 != nil || err2 != nil || from == 0 {
		return 0, errors.New("missing or bad raft headers")
	}
	if to != t.id {
		return 0, fmt.Errorf("this is node %d, not %d", t.id, to)
	}
	return from, nil
}

func (t *httpTransport) serveStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(t.h.status())
}

// peer sends frames to one peer, over two lanes.
type peer struct {
	t        *httpTransport
	id       uint64
	app, ctl *lane
	stop     chan struct{}

	mu   sync.Mutex // guards addr
	addr string
}

// lane is one queue of messages to a peer and the stream it writes them
// into.
type lane struct {
	p    *peer
	name string
	q    chan pb.Message
}

func (p *peer) setAddr(a string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addr = a
}

func (p *peer) url(path string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "http://" + p.addr + path
}

// run takes queued messages and writes them, as many as are waiting per
// frame, into the current stream, opening one when needed. While the peer
// cannot be reached, messages are dropped (raft re-sends).
func (l *lane) run() {
	p := l.p
	var s *stream
	defer func() {
		if s != nil {
			s.close(errors.New("stopped"))
		}
	}()
	backoff := redialAfter
	var buf []byte
	for {
		var first pb.Message
		var dead <-chan struct{}
		if s != nil {
			dead = s.dead
		}
		select {
		case <-p.stop:
			return
		case first = <-l.q:
		case <-dead:
			// The stream ended under us (the peer stopped, or the
			// connection broke). Redial at once rather than at the next
			// message: a refusal tells that the peer's process is gone,
			// and a follower of a dead leader has nothing to send it.
			s.close(errors.New("stream ended"))
			s = nil
			ns, err := p.open(l.name)
			if err != nil {
				p.t.h.unreachable(p.id)
				if errors.Is(err, syscall.ECONNREFUSED) {
					p.t.h.gone(p.id)
				}
				if !p.sleep(backoff) {
					return
				}
				backoff = min(2*backoff, maxRedial)
				continue
			}
			s = ns
			continue
		}
		msgs := []pb.Message{first}
		size := first.Size()
	more:
		for len(msgs) < 1024 && size < maxMsgBytes*4 {
			select {
			case m := <-l.q:
				msgs = append(msgs, m)
				size += m.Size()
			default:
				break more
			}
		}
		if s == nil {
			var err error
			if s, err = p.open(l.name); err != nil {
				p.t.h.unreachable(p.id)
				if errors.Is(err, syscall.ECONNREFUSED) {
					p.t.h.gone(p.id)
				}
				if !p.sleep(backoff) {
					return
				}
				backoff = min(2*backoff, maxRedial)
				continue
			}
		}
		f := &frame{from: p.t.id, to: p.id, msgs: msgs}
		p.t.h.stamp(f)
		var err error
		buf, err = appendFrame(append(buf[:0], 0, 0, 0, 0), f)
		if err != nil {
			p.t.log.Error("cannot encode a frame", zap.Error(err))
			continue
		}
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		if err := s.write(buf); err != nil {
			s.close(err)
			s = nil
			p.t.h.unreachable(p.id)
			continue
		}
		backoff = redialAfter
		if cap(buf) > 1<<20 {
			buf = nil // do not keep a big one
		}
	}
}

func (p *peer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.stop:
		return false
	case <-t.C:
		return true
	}
}

// stream is one open POST to the peer whose body we write.
type stream struct {
	pw   *io.PipeWriter
	pr   *io.PipeReader
	dead chan struct{} // closed when the request ended
}

// open starts a stream. The request runs in the background; its body is
// the pipe we write frames into.
func (p *peer) open(lane string) (*stream, error) {
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, p.url(pathStream)+"?lane="+lane, pr)
	if err != nil {
		return nil, err
	}
	req.Header.Set(headerFrom, strconv.FormatUint(p.t.id, 10))
	req.Header.Set(headerTo, strconv.FormatUint(p.id, 10))
	s := &stream{pw: pw, pr: pr, dead: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(s.dead)
		client := p.t.client
		if lane == "ctl" {
			client = p.t.ctlClient
		}
		resp, err := client.Do(req)
		if err != nil {
			started <- err
			pr.CloseWithError(err)
			return
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			err := fmt.Errorf("peer %d refused the stream: %s: %s", p.id, resp.Status, body)
			started <- err
			pr.CloseWithError(err)
			return
		}
		started <- nil
		_, _ = io.Copy(io.Discard, resp.Body) // until the peer ends the stream
		resp.Body.Close()
		pr.CloseWithError(errors.New("stream ended by the peer"))
	}()
	select {
	case err := <-started:
		if err != nil {
			return nil, err
		}
		return s, nil
	case <-time.After(dialTimeout + writeTimeout):
		pr.CloseWithError(errors.New("stream did not start in time"))
		return nil, errors.New("stream did not start in time")
	}
}

// write writes one frame, giving up after writeTimeout plus a second per
// MiB (a peer that stopped reading, or a connection cut without a reset).
// A large append (a 12 MiB batch) takes more than writeTimeout on a loaded
// machine, paced by HTTP/2 flow control: cut at a fixed time, it was sent
// again and again and never committed.
func (s *stream) write(b []byte) error {
	limit := writeTimeout + time.Duration(len(b)>>20)*time.Second
	timer := time.AfterFunc(limit, func() { s.pr.CloseWithError(errors.New("write timed out")) })
	defer timer.Stop()
	_, err := s.pw.Write(b)
	return err
}

func (s *stream) close(err error) {
	s.pr.CloseWithError(err)
	s.pw.CloseWithError(err)
}
