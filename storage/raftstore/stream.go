package raftstore

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// A stream is one TCP connection from a node to a peer, for one lane. The
// sender opens it with an HTTP/1.1 request on the peer port,
//
//	GET /raft/stream?lane=app HTTP/1.1
//	Connection: Upgrade
//	Upgrade: omnibus-raft/2
//	Omnibus-Raft-From: 1
//	Omnibus-Raft-To: 2
//
// which net/http parses and routes, and answers with 101 Switching
// Protocols before handing over the connection. From then on the sender
// writes frames, each a 4-byte big-endian length and a frame (appendFrame):
// each frame carries one Raft group's messages, and what the lane holds
// for several groups goes out in one write, frame after frame (so a peer
// gets every group's messages over the same two connections, batched). A
// length of 0 is a ping, written when nothing else was for pingAfter.
// Version 2 of the protocol added the group to the frame; version 1 peers
// are refused at the upgrade. The receiver writes one byte back every pingAfter.
// Each end reads with a deadline of stallTimeout and closes the connection
// when it passes.
//
// Why not HTTP/2 streams any more: a frame written into a request body
// went through an io.Pipe to net/http's HTTP/2 writer goroutine, into DATA
// frames, and on the peer through its frame reader, its serve goroutine
// and the body's pipe to the handler, with flow-control updates back:
// several goroutine hand-offs and copies per frame on each side. Written
// straight into the socket, a frame costs a write on one side and a read
// on the other (BenchmarkTransport; DESIGN.md, "Peer transport").

// Constants of the stream protocol.
const (
	streamProtocol    = "omnibus-raft/2"
	laneApp, laneCtl  = "app", "ctl"
	maxInboundStreams = 64      // streams peers may hold open to a node
	keepBufBytes      = 1 << 20 // frame buffers up to this size are reused
	readBufBytes      = 64 << 10
)

// pingFrame is a frame of length 0.
var pingFrame [4]byte

// errRefused is a peer port that answered the stream request with
// something other than 101 Switching Protocols.
var errRefused = errors.New("refused the stream")

// run takes queued messages and writes them, as many as are waiting per
// frame, into the lane's stream, opening one when needed. While the peer
// cannot be reached, messages are dropped (raft re-sends).
func (l *lane) run() {
	p := l.p
	var s *stream
	defer func() {
		if s != nil {
			s.close()
		}
	}()
	ping := time.NewTicker(pingAfter)
	defer ping.Stop()
	wrote := false // since the last tick
	backoff := redialAfter
	var buf []byte
	var msgs []groupMsg
	ok := true
	for {
		var dead <-chan struct{}
		if s != nil {
			dead = s.dead
		}
		var first groupMsg
		select {
		case <-p.stop:
			return
		case <-ping.C:
			if s != nil && !wrote {
				if err := s.write(pingFrame[:]); err != nil {
					if s, ok = l.reconnect(s, &backoff); !ok {
						return
					}
				}
			}
			wrote = false
			continue
		case <-dead:
			// The connection ended under us (the peer stopped, or it broke
			// or fell silent).
			if s, ok = l.reconnect(s, &backoff); !ok {
				return
			}
			continue
		case first = <-l.q:
		}
		// Let whatever else can run go first (the loop, the other lanes),
		// so that what they queue meanwhile goes into this frame. Without
		// it the lanes of one Ready were unequal: the runtime runs the
		// goroutine woken last at once, so one follower got each Ready
		// alone and fsynced its log about twice as often as the other
		// (0.009 against 0.004 per message on one scheduler thread). On a
		// node with nothing else to run this returns at once.
		runtime.Gosched()
		msgs = append(msgs[:0], first)
		size := first.m.Size()
	more:
		for len(msgs) < 1024 && size < laneFrameBytes {
			select {
			case m := <-l.q:
				msgs = append(msgs, m)
				size += m.m.Size()
			default:
				break more
			}
		}
		if s == nil {
			if s, _, ok = l.connect(&backoff); !ok {
				return
			}
			if s == nil {
				continue
			}
		}
		var err error
		buf, err = l.appendFrames(buf[:0], msgs)
		clear(msgs) // do not keep their entries alive
		if err != nil {
			p.t.log.Error("cannot encode a frame", zap.Error(err))
			continue
		}
		if err := s.write(buf); err != nil {
			if s, ok = l.reconnect(s, &backoff); !ok {
				return
			}
			continue
		}
		wrote = true
		if cap(buf) > keepBufBytes {
			buf = nil // do not keep a big one
		}
	}
}

// groupMsg is a raft message of one group, queued for a peer.
type groupMsg struct {
	group uint64
	m     pb.Message
}

// appendFrames encodes msgs as one length-prefixed frame per group, in
// the order of each group's first message (a group's own messages keep
// their order), each frame stamped with its group's lease fields.
func (l *lane) appendFrames(buf []byte, msgs []groupMsg) ([]byte, error) {
	p := l.p
	var groups []uint64
	by := map[uint64][]pb.Message{}
	for _, gm := range msgs {
		if _, ok := by[gm.group]; !ok {
			groups = append(groups, gm.group)
		}
		by[gm.group] = append(by[gm.group], gm.m)
	}
	for _, g := range groups {
		f := &frame{group: g, from: p.t.id, to: p.id, msgs: by[g]}
		p.t.h.stamp(f)
		start := len(buf)
		var err error
		if buf, err = appendFrame(append(buf, 0, 0, 0, 0), f); err != nil {
			return buf[:start], err
		}
		binary.BigEndian.PutUint32(buf[start:], uint32(len(buf)-start-4))
	}
	return buf, nil
}

// reconnect replaces the broken stream s. Raft hears that the peer is
// unreachable (what was written may be lost), and the lane dials again at
// once rather than at its next message, until the peer answers or refuses:
// a refusal tells that the peer's process is gone, and a follower of a
// dead leader has nothing to send it. ok is false once the peer was
// removed.
func (l *lane) reconnect(broken *stream, backoff *time.Duration) (*stream, bool) {
	broken.close()
	l.p.t.h.unreachable(l.p.id)
	for {
		s, refused, ok := l.connect(backoff)
		if s != nil || refused || !ok {
			return s, ok
		}
	}
}

// connect opens the lane's stream. When it cannot, it reports the peer
// unreachable (and gone, if the connection was refused), waits *backoff,
// doubles it and returns nil; ok is false once the peer was removed.
func (l *lane) connect(backoff *time.Duration) (s *stream, refused, ok bool) {
	p := l.p
	s, err := p.open(l.name)
	if err == nil {
		*backoff = redialAfter
		l.refusal = ""
		return s, false, true
	}
	p.t.h.unreachable(p.id)
	refused = errors.Is(err, syscall.ECONNREFUSED)
	if refused {
		p.t.h.gone(p.id)
	}
	if (errors.Is(err, errRefused) || isAuthRefusal(err)) && err.Error() != l.refusal {
		l.refusal = err.Error() // said once, not at every redial
		p.t.log.Warn("peer refused a stream", zap.Uint64("peer", p.id), zap.String("lane", l.name), zap.Error(err))
	}
	if !p.sleep(*backoff) {
		return nil, refused, false
	}
	*backoff = min(2**backoff, maxRedial)
	return nil, refused, true
}

// stream is the sending end of a lane's connection.
type stream struct {
	conn  net.Conn
	batch *recordBatcher // under conn's TLS; nil without TLS
	dead  chan struct{}  // closed when the connection ended or fell silent
}

// open dials the peer (mutual TLS, when configured) and upgrades the
// connection to a stream.
func (p *peer) open(lane string) (*stream, error) {
	addr := p.address()
	conn, err := p.t.dialer.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	var batch *recordBatcher
	if p.tls != nil {
		batch = &recordBatcher{Conn: conn}
		tc := tls.Client(batch, p.tls)
		conn = tc
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		err = tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			conn.Close()
			return nil, err
		}
	}
	br, err := p.upgrade(conn, addr, lane)
	if err != nil {
		conn.Close()
		return nil, err
	}
	s := &stream{conn: conn, batch: batch, dead: make(chan struct{})}
	p.t.wg.Go(func() { s.watch(br) })
	return s, nil
}

// upgrade sends the stream request on conn and reads the answer.
func (p *peer) upgrade(conn net.Conn, addr, lane string) (*bufio.Reader, error) {
	if err := conn.SetDeadline(time.Now().Add(writeTimeout)); err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodGet, p.t.sec.scheme()+"://"+addr+pathStream+"?lane="+lane, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", streamProtocol)
	req.Header.Set(headerFrom, strconv.FormatUint(p.t.id, 10))
	req.Header.Set(headerTo, strconv.FormatUint(p.id, 10))
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 512)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), streamProtocol) {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		hint := ""
		if resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotFound {
			hint = " (an older omnibus? every member must run the same version)"
		}
		return nil, fmt.Errorf("peer %d %w: %s: %s%s", p.id, errRefused, resp.Status, strings.TrimSpace(string(body)), hint)
	}
	return br, conn.SetDeadline(time.Time{})
}

// watch reads what the receiver writes back (keepalives) until the
// connection ends or nothing came for stallTimeout, then closes it.
func (s *stream) watch(br *bufio.Reader) {
	defer close(s.dead)
	defer s.conn.Close()
	var b [64]byte
	for {
		if err := s.conn.SetReadDeadline(time.Now().Add(stallTimeout)); err != nil {
			return
		}
		if _, err := br.Read(b[:]); err != nil {
			return
		}
	}
}

// write writes one frame, giving up after writeTimeout plus a second per
// MiB (a peer that stopped reading, or a connection cut without a reset).
// A large append (a 12 MiB batch) takes more than writeTimeout on a loaded
// machine: cut at a fixed time, it was sent again and again and never
// committed.
func (s *stream) write(b []byte) error {
	limit := writeTimeout + time.Duration(len(b)>>20)*time.Second
	if err := s.conn.SetWriteDeadline(time.Now().Add(limit)); err != nil {
		return err
	}
	if s.batch == nil || len(b) > batchFrameBytes {
		_, err := s.conn.Write(b)
		return err
	}
	s.batch.hold()
	_, err := s.conn.Write(b)
	if ferr := s.batch.flush(); err == nil {
		err = ferr
	}
	return err
}

func (s *stream) close() { s.conn.Close() }

// inboundKey names a stream a peer opened to this node.
type inboundKey struct {
	from uint64
	lane string
}

// inStream is a stream a peer opened to this node; conn is nil until the
// connection is taken over from net/http. Guarded by httpTransport.mu.
type inStream struct{ conn net.Conn }

func (in *inStream) closeLocked() {
	if in.conn != nil {
		in.conn.Close()
	}
}

// serveStream upgrades a peer's request to a stream and reads its frames
// until the stream ends.
func (t *httpTransport) serveStream(w http.ResponseWriter, r *http.Request) {
	from, ok := t.checkSender(w, r)
	if !ok {
		return
	}
	lane := r.URL.Query().Get("lane")
	if lane != laneApp && lane != laneCtl {
		http.Error(w, "lane must be app or ctl", http.StatusBadRequest)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok || !strings.EqualFold(r.Header.Get("Upgrade"), streamProtocol) {
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", streamProtocol)
		http.Error(w, "a raft stream is an HTTP/1.1 upgrade to "+streamProtocol, http.StatusUpgradeRequired)
		return
	}
	key := inboundKey{from: from, lane: lane}
	in, err := t.admit(key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer t.leave(key, in)
	w.Header().Set("Connection", "Upgrade")
	w.Header().Set("Upgrade", streamProtocol)
	w.WriteHeader(http.StatusSwitchingProtocols)
	conn, brw, err := hj.Hijack() // sends the 101
	if err != nil {
		t.log.Warn("cannot take over a peer's stream", zap.Uint64("peer", from), zap.Error(err))
		return
	}
	defer conn.Close()
	if !t.attach(key, in, conn) {
		return
	}
	bufferReads(conn) // an admitted stream
	stop := make(chan struct{})
	var keeper sync.WaitGroup
	keeper.Go(func() { keepAlive(conn, stop) })
	defer keeper.Wait()
	defer close(stop)
	t.readFrames(conn, brw.Reader, from)
}

// readFrames reads frames from a peer's stream and hands them to the node,
// until the stream ends, falls silent for stallTimeout, or carries a bad
// or oversized frame (which closes only this stream). src is what the
// stream's bytes come from (net/http's reader of the connection taken
// over); conn is the connection, for its deadlines.
func (t *httpTransport) readFrames(conn net.Conn, src io.Reader, from uint64) {
	br := bufio.NewReaderSize(src, readBufBytes)
	body := bodyReader{br, src}
	var hdr [4]byte
	var arena frameArena
	var data []byte // the frames over keepBufBytes, reused
	for {
		if err := conn.SetReadDeadline(time.Now().Add(stallTimeout)); err != nil {
			return
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 {
			continue // a ping
		}
		if n > maxFrameBytes {
			t.log.Warn("peer sent a frame over the cap; closing its stream", zap.Uint64("peer", from),
				zap.Uint32("bytes", n), zap.Int("cap", maxFrameBytes))
			return
		}
		if n >= 1<<20 {
			if err := conn.SetReadDeadline(time.Now().Add(stallTimeout + time.Duration(n>>20)*time.Second)); err != nil {
				return
			}
		}
		f, err := readFrame(body, &arena, &data, int(n), keepBufBytes)
		if err != nil || f.from != from || f.to != t.id {
			t.log.Warn("bad frame from a peer; closing its stream", zap.Uint64("peer", from), zap.Error(err))
			return
		}
		if !t.h.receive(f) {
			return
		}
		if cap(data) > keepBufBytes {
			data = nil
		}
	}
}

// readFrame reads a frame body of n bytes and decodes it. One up to
// arenaMax bytes (readFrames: keepBufBytes) is read into a buffer of its
// own from arena, which the frame's entries keep; a bigger one (a
// snapshot's worth of appends) into *big, reused, which grows as its
// bytes arrive (readBody), its entries copied out.
func readFrame(br io.Reader, arena *frameArena, big *[]byte, n, arenaMax int) (*frame, error) {
	if n <= arenaMax {
		data := arena.take(n)
		if _, err := io.ReadFull(br, data); err != nil {
			return nil, err
		}
		return parseFrame(data, true)
	}
	var err error
	if *big, err = readBody(br, *big, n); err != nil {
		return nil, err
	}
	return parseFrame(*big, false)
}

// bodyReader reads a frame's body: what br has buffered, then straight
// from src, what br reads from, into the body's buffer once br is empty;
// nothing is then held between the two, whatever src buffers of its own
// (it is net/http's reader of the connection taken over, which passes
// reads of 4 KiB or more through to the connection). Through br alone
// every byte would be copied once more, out of br's buffer: a TLS
// connection hands over at most one record (16 KiB) per read, so br's
// reads, which fill its buffer, were the body's reads, each followed by
// that copy (6 % of a follower's CPU, the bulk of its memmove). The
// length prefixes still go through br, and with them the small frames
// that arrive together.
type bodyReader struct {
	br  *bufio.Reader
	src io.Reader
}

func (b bodyReader) Read(p []byte) (int, error) {
	if b.br.Buffered() > 0 {
		return b.br.Read(p)
	}
	return b.src.Read(p)
}

// readBody reads n bytes into buf (reused), which grows as they arrive,
// doubling from a MiB, rather than to n at once: a frame's length alone
// does not make this node allocate it.
func readBody(r io.Reader, buf []byte, n int) ([]byte, error) {
	if cap(buf) >= n {
		buf = buf[:n]
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf = buf[:0]
	for len(buf) < n {
		step := min(n-len(buf), max(len(buf), 1<<20))
		buf = slices.Grow(buf, step)
		got, err := io.ReadFull(r, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+got]
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// keepAlive writes a byte to conn every pingAfter until stop is closed or
// a write fails (then it closes conn).
func keepAlive(conn net.Conn, stop <-chan struct{}) {
	tick := time.NewTicker(pingAfter)
	defer tick.Stop()
	b := []byte{0}
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if conn.SetWriteDeadline(time.Now().Add(stallTimeout)) != nil {
			conn.Close()
			return
		}
		if _, err := conn.Write(b); err != nil {
			conn.Close()
			return
		}
	}
}

// admit makes room for a peer's new stream. It replaces the peer's
// previous stream on that lane (the peer redialled: that one is dead, or
// about to be), and refuses beyond maxInboundStreams or once closed.
func (t *httpTransport) admit(key inboundKey) (*inStream, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errors.New("node closing")
	}
	old := t.inbound[key]
	if old == nil && len(t.inbound) >= maxInboundStreams {
		return nil, fmt.Errorf("already %d streams from peers", maxInboundStreams)
	}
	if old != nil {
		old.closeLocked()
	}
	in := &inStream{}
	t.inbound[key] = in
	t.wg.Add(1)
	return in, nil
}

// attach records in's connection; false if in was replaced or the
// transport closed meanwhile.
func (t *httpTransport) attach(key inboundKey, in *inStream, conn net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.inbound[key] != in {
		return false
	}
	in.conn = conn
	return true
}

func (t *httpTransport) leave(key inboundKey, in *inStream) {
	t.mu.Lock()
	if t.inbound[key] == in {
		delete(t.inbound, key)
	}
	t.mu.Unlock()
	t.wg.Done()
}
