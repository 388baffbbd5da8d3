package raftstore

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Peer connections for other protocols. The broker's own traffic between
// nodes (a routed broker's calls on another node's data group:
// cmd/omnibus/clusterrpc) travels on the peer port too, so that it gets
// the same mutual TLS and node identities as Raft's streams: a node opens
// one with DialPeer, an HTTP/1.1 upgrade of GET /raft/conn to the
// protocol it names, and the peer hands the connection to the handler it
// registered for that protocol (Config.PeerProtocols).

const pathConn = "/raft/conn"

// PeerHandler serves a connection of one protocol that peer node from
// opened; it owns conn, and br holds what was read of it already.
type PeerHandler func(conn net.Conn, br *bufio.Reader, from uint64)

// DialPeer opens a connection of protocol to node id's peer port (mutual
// TLS, its certificate checked to name id) and upgrades it; br holds what
// the peer sent after its answer, if anything.
func (n *Node) DialPeer(ctx context.Context, id uint64, protocol string) (net.Conn, *bufio.Reader, error) {
	t, ok := n.host.tr.(*httpTransport)
	if !ok {
		return nil, nil, fmt.Errorf("raftstore: this node's transport opens no peer connections")
	}
	t.mu.Lock()
	p := t.peers[id]
	t.mu.Unlock()
	if p == nil {
		return nil, nil, fmt.Errorf("raftstore: node %d is no peer of node %d", id, n.id)
	}
	addr := p.address()
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 10 * time.Second}
	var conn net.Conn
	var err error
	if p.tls != nil {
		conn, err = (&tls.Dialer{NetDialer: d, Config: p.tls}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, nil, err
	}
	br, err := upgradeConn(conn, t.sec.scheme()+"://"+addr+pathConn, n.id, id, protocol)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, br, nil
}

// upgradeConn asks the peer to take conn over for protocol.
func upgradeConn(conn net.Conn, url string, from, to uint64, protocol string) (*bufio.Reader, error) {
	if err := conn.SetDeadline(time.Now().Add(writeTimeout)); err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", protocol)
	req.Header.Set(headerFrom, strconv.FormatUint(from, 10))
	req.Header.Set(headerTo, strconv.FormatUint(to, 10))
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), protocol) {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("peer %d %w: %s: %s", to, errRefused, resp.Status, strings.TrimSpace(string(body)))
	}
	return br, conn.SetDeadline(time.Time{})
}

// serveConn hands a peer's connection to the handler of the protocol it
// asks for.
func (t *httpTransport) serveConn(w http.ResponseWriter, r *http.Request) {
	from, ok := t.checkSender(w, r)
	if !ok {
		return
	}
	protocol := r.Header.Get("Upgrade")
	h := t.protocols[protocol]
	hj, isHJ := w.(http.Hijacker)
	if h == nil || !isHJ {
		http.Error(w, fmt.Sprintf("no peer protocol %q here", protocol), http.StatusUpgradeRequired)
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		http.Error(w, "node closing", http.StatusServiceUnavailable)
		return
	}
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()
	w.Header().Set("Connection", "Upgrade")
	w.Header().Set("Upgrade", protocol)
	w.WriteHeader(http.StatusSwitchingProtocols)
	conn, brw, err := hj.Hijack()
	if err != nil {
		t.log.Warn("cannot take over a peer's connection", zap.Uint64("peer", from), zap.Error(err))
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		conn.Close()
		return
	}
	t.conns[conn] = struct{}{}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.conns, conn)
		t.mu.Unlock()
	}()
	_ = conn.SetDeadline(time.Time{})
	h(conn, brw.Reader, from)
}
