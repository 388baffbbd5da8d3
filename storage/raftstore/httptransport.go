package raftstore

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// The peer transport listens on one port, served by net/http: the peer
// API (GET /raft/status, POST /raft/members, POST /raft/tokens), snapshots
// (POST /raft/snapshot, HTTP/2, one request each), the join exchange
// (POST /join) and the streams raft's messages travel on. Each node keeps
// two streams to each peer, one per lane: appends (MsgApp, which can carry
// megabytes) on one, everything else (heartbeats, votes,
// acknowledgements) on the other, each over its own TCP connection, so
// that a large append never delays a heartbeat. A stream starts as an
// HTTP/1.1 request that net/http answers with 101 Switching Protocols;
// from then on the connection carries length-prefixed frames one way and
// keepalives the other (stream.go).
//
// With credentials (Config.TLS) every connection is mutual TLS 1.3
// (peerauth.go): nothing under /raft/ answers a client without a
// certificate of the cluster's CA, and a stream or snapshot is taken only
// from the node its certificate names.

// Timeouts of the peer transport.
const (
	dialTimeout  = time.Second
	writeTimeout = 2 * time.Second // one frame into a stream (plus a second per MiB)
	// Each end of a stream writes something at least every pingAfter
	// (frames, or a ping when idle, one way; keepalives the other) and
	// closes it when it read nothing for stallTimeout: a peer frozen, or a
	// connection cut without a reset. A frame larger than a MiB extends
	// the read deadline, as the write deadline, by a second per MiB. Not
	// less than 5 s: with a one-second limit (HTTP/2 pings, which waited
	// behind the appends already on the connection), a loaded machine
	// dropped the connection in the middle of every 12 MiB append, which
	// was then never committed.
	pingAfter    = time.Second
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
	pathTokens   = "/raft/tokens"
	pathRenew    = "/raft/renew"
	pathJoin     = "/join"
	headerFrom   = "Omnibus-Raft-From"
	headerTo     = "Omnibus-Raft-To"
	headerGroup  = "Omnibus-Raft-Group"
)

// peerSecurity is how the peer port authenticates.
type peerSecurity struct {
	// creds are the node's TLS credentials; nil: plain TCP.
	creds *peertls.Creds
	// admin checks admin requests beyond the certificate (nil refuses).
	admin func(*http.Request) error
}

type httpTransport struct {
	id         uint64
	listenAddr string
	log        *zap.Logger
	sec        peerSecurity
	dialer     net.Dialer // streams
	srv        *http.Server
	ln         net.Listener
	h          handler
	tokens     *tokenBook
	refusals   refusalLog
	protocols  map[string]PeerHandler // peer connections of other protocols, by name (peerconn.go)
	now        func() time.Time       // join tokens' clock (tests move it)

	mu      sync.Mutex // guards the fields below
	peers   map[uint64]*peer
	inbound map[inboundKey]*inStream // streams peers opened to us, one per peer and lane
	closed  bool
	snapOut map[snapKey]bool        // peers with a snapshot of a group being sent
	snapIn  map[uint64]*snapReceive // groups with a snapshot being received
	conns   map[net.Conn]struct{}   // peer connections of other protocols (peerconn.go)
	wg      sync.WaitGroup          // peer senders, snapshot senders, inbound streams
}

func newHTTPTransport(id uint64, listen string, ln net.Listener, sec peerSecurity, log *zap.Logger) *httpTransport {
	return &httpTransport{id: id, listenAddr: listen, ln: ln, log: log, sec: sec,
		dialer: net.Dialer{Timeout: dialTimeout, KeepAlive: 10 * time.Second}, tokens: newTokenBook(), now: time.Now,
		peers: map[uint64]*peer{}, inbound: map[inboundKey]*inStream{}, snapOut: map[snapKey]bool{}, snapIn: map[uint64]*snapReceive{}, conns: map[net.Conn]struct{}{}}
}

// scheme is the peer API's URL scheme.
func (sec peerSecurity) scheme() string {
	if sec.creds == nil {
		return "http"
	}
	return "https"
}

// newSnapshotClient is the HTTP/2 client snapshots are sent to peer with
// (over TLS when there are credentials, h2c otherwise): its pings and
// write timeouts find a peer that stopped reading.
func (sec peerSecurity) newSnapshotClient(peer uint64) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: dialTimeout, KeepAlive: 10 * time.Second}).DialContext,
		Protocols:           new(http.Protocols),
		HTTP2:               &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: stallTimeout, WriteByteTimeout: stallTimeout},
		MaxIdleConnsPerHost: 4,
	}
	if sec.creds != nil {
		tr.TLSClientConfig = sec.creds.ClientConfig(peer)
		tr.TLSHandshakeTimeout = dialTimeout
		tr.Protocols.SetHTTP2(true)
	} else {
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
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
	mux.HandleFunc("GET "+pathStream, t.serveStream)
	mux.HandleFunc("POST "+pathSnapshot, t.serveSnapshot)
	mux.HandleFunc("GET "+pathStatus, t.serveStatus)
	mux.HandleFunc("POST "+pathMembers, t.adminOnly(t.serveMembers))
	mux.HandleFunc("POST "+pathTokens, t.adminOnly(t.serveTokens))
	mux.HandleFunc("POST "+pathRenew, t.adminOnly(t.serveRenew))
	mux.HandleFunc("POST "+pathJoin, t.serveJoin)
	mux.HandleFunc("GET "+pathConn, t.serveConn)
	t.srv = &http.Server{Handler: t.guard(mux), Protocols: new(http.Protocols), ReadHeaderTimeout: 5 * time.Second,
		HTTP2:    &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: stallTimeout, WriteByteTimeout: stallTimeout, MaxReadFrameSize: 1 << 20},
		ErrorLog: log.New(refusalWriter{t}, "", 0)}
	t.srv.Protocols.SetHTTP1(true) // streams, status for curl
	if t.sec.creds != nil {
		t.srv.Protocols.SetHTTP2(true)
		t.srv.TLSConfig = t.serverTLS()
	} else {
		t.srv.Protocols.SetUnencryptedHTTP2(true)
	}
	go func() {
		var err error
		if t.sec.creds != nil {
			err = t.srv.ServeTLS(readBufListener{ln}, "", "")
		} else {
			err = t.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
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

func (t *httpTransport) setPeer(group, id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if p, ok := t.peers[id]; ok {
		p.groups[group] = true
		p.setAddr(addr)
		return
	}
	p := &peer{t: t, id: id, addr: addr, stop: make(chan struct{}), client: t.sec.newSnapshotClient(id),
		groups: map[uint64]bool{group: true}}
	if t.sec.creds != nil {
		p.tls = t.sec.creds.ClientConfig(id)
		p.tls.NextProtos = []string{"http/1.1"} // a stream is an HTTP/1.1 upgrade
	}
	p.app = &lane{p: p, name: laneApp, q: make(chan groupMsg, sendQueueLen)}
	p.ctl = &lane{p: p, name: laneCtl, q: make(chan groupMsg, sendQueueLen)}
	t.peers[id] = p
	t.wg.Go(p.app.run)
	t.wg.Go(p.ctl.run)
}

func (t *httpTransport) removePeer(group, id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.peers[id]; ok {
		delete(p.groups, group)
		if len(p.groups) > 0 {
			return // still a member of another group of this node's
		}
		close(p.stop)
		p.client.CloseIdleConnections()
		delete(t.peers, id)
	}
}

func (t *httpTransport) send(group, to uint64, msgs []pb.Message) {
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
		case l.q <- groupMsg{group: group, m: m}:
		default:
			t.h.unreachable(to) // raft re-sends
		}
	}
}

func (t *httpTransport) close() error {
	t.mu.Lock()
	t.closed = true
	var clients []*http.Client
	for id, p := range t.peers {
		close(p.stop)
		clients = append(clients, p.client)
		delete(t.peers, id)
	}
	t.mu.Unlock()
	// The listener first (Shutdown closes it at once), then the streams
	// peers opened: a peer that sees its stream end redials, and must be
	// refused (this node is gone), not taken in again.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := t.srv.Shutdown(ctx)
	if err != nil {
		err = t.srv.Close()
	}
	t.mu.Lock()
	for _, in := range t.inbound {
		in.closeLocked()
	}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	return err
}

// serveStatus answers a group's status: ?group=N, the meta group (0)
// without.
func (t *httpTransport) serveStatus(w http.ResponseWriter, r *http.Request) {
	group, ok := groupParam(w, r)
	if !ok {
		return
	}
	st, ok := t.h.status(group)
	if !ok {
		http.Error(w, fmt.Sprintf("this node runs no group %d", group), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// groupParam reads the group a peer request is about: the query's group
// or the Omnibus-Raft-Group header, 0 (the meta group) when neither is
// given.
func groupParam(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	v := r.URL.Query().Get("group")
	if v == "" {
		v = r.Header.Get(headerGroup)
	}
	if v == "" {
		return 0, true
	}
	g, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		http.Error(w, "group must be a number", http.StatusBadRequest)
		return 0, false
	}
	return g, true
}

// peer sends frames to one peer, over two lanes.
type peer struct {
	t        *httpTransport
	id       uint64
	app, ctl *lane
	stop     chan struct{}
	client   *http.Client    // snapshots
	tls      *tls.Config     // streams; nil: plain TCP
	groups   map[uint64]bool // the groups it is a member of with this node; guarded by httpTransport.mu

	mu   sync.Mutex // guards addr
	addr string
}

// lane is one queue of messages to a peer and the stream it writes them
// into; its goroutine (run) alone uses refusal.
type lane struct {
	p       *peer
	name    string
	q       chan groupMsg
	refusal string // the peer's last refusal to open a stream, logged once
}

func (p *peer) setAddr(a string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addr = a
}

func (p *peer) address() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

func (p *peer) url(path string) string { return p.t.sec.scheme() + "://" + p.address() + path }

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
