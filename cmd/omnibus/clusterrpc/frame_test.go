package clusterrpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/gopool"
)

// newHeldFrameConn is a frameConn whose writer never runs: what a write
// queues stays in pending for the test to read.
func newHeldFrameConn() *frameConn {
	return &frameConn{started: true, wake: make(chan struct{}, 1), closed: make(chan struct{}), pending: make([]byte, 0, 1<<20)}
}

// newHeldClient is a client whose connection is a held frameConn: its
// requests stay queued, and the test answers them (pendingCall.deliver).
func newHeldClient(t testing.TB) (*Client, *clientConn) {
	c := &Client{tasks: gopool.New(maxIdleTasks)}
	t.Cleanup(c.tasks.Close)
	cc := &clientConn{fc: newHeldFrameConn(), tasks: c.tasks, pending: map[uint64]*pendingCall{}}
	c.cur = cc
	return c, cc
}

// answerAll answers every call under way on cc with ans (nil: as a
// broken connection does).
func answerAll(cc *clientConn, ans []byte) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for id, p := range cc.pending {
		delete(cc.pending, id)
		p.deliver(cc.tasks, ans)
	}
}

// readQueued splits the frames queued in fc into their payloads.
func readQueued(t *testing.T, fc *frameConn) [][]byte {
	t.Helper()
	var out [][]byte
	b := fc.pending
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("%d bytes left after the frames, less than a length", len(b))
		}
		n := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+n {
			t.Fatalf("a frame of %d bytes with %d after its length", n, len(b)-4)
		}
		out = append(out, b[4:4+n])
		b = b[4+n:]
	}
	return out
}

// A request's arguments go straight into the connection's pending bytes
// behind their call id, operation and group: the client builds no frame
// of its own, which for a send copied the message once more.
func TestRequestAllocatesNoFrame(t *testing.T) {
	cc := &clientConn{fc: newHeldFrameConn(), pending: map[uint64]*pendingCall{}}
	c := &Client{cur: cc}
	args := bytes.Repeat([]byte{'a'}, 4096)
	_, id, _, err := c.start(t.Context(), opSendAsync, 300, args, true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	frames := readQueued(t, cc.fc)
	if len(frames) != 1 {
		t.Fatalf("got %d frames, want 1", len(frames))
	}
	d := &dec{b: frames[0]}
	if gotID, op, g := d.uvarint(), d.byte(), d.uvarint(); d.err != nil || gotID != id || op != opSendAsync || g != 300 || !bytes.Equal(d.b, args) {
		t.Fatalf("the request decodes as id %d op %d group %d with %d bytes of arguments (%v), want %d %d 300 %d", gotID, op, g, len(d.b), d.err, id, opSendAsync, len(args))
	}
	allocs := testing.AllocsPerRun(100, func() {
		_, id, _, _ := c.start(t.Context(), opSendAsync, 300, args, true, nil, nil)
		delete(cc.pending, id)
		cc.fc.pending = cc.fc.pending[:0]
	})
	// The call's pendingCall and its channel (with its buffer); nothing
	// for the frame.
	if allocs > 3 {
		t.Errorf("a request allocates %v times, want at most 3 (the call, its channel and the channel's buffer)", allocs)
	}
}

// An answer's result goes straight into the pending bytes behind its
// call id and status: a receive's messages are not copied once more.
func TestAnswerAllocatesNoFrame(t *testing.T) {
	c := &serverConn{fc: newHeldFrameConn()}
	res := bytes.Repeat([]byte{'r'}, 4096)
	c.answerCommitted(1<<40, res)
	frames := readQueued(t, c.fc)
	if len(frames) != 1 {
		t.Fatalf("got %d frames, want 1", len(frames))
	}
	d := &dec{b: frames[0]}
	if id, status := d.uvarint(), d.byte(); d.err != nil || id != 1<<40 || status != statusOK || !bytes.Equal(d.b, res) {
		t.Fatalf("the answer decodes as id %d status %d with %d bytes of result (%v)", id, status, len(d.b), d.err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		c.answerCommitted(7, res)
		c.fc.pending = c.fc.pending[:0]
	})
	if allocs != 0 {
		t.Errorf("an answer allocates %v times, want 0", allocs)
	}
}

// A routed send is encoded into a pooled buffer, which the request is
// copied out of: sending a 64 KiB message allocates far less than the
// message (a fresh buffer for it was allocated per send).
func TestRequestEncodingAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what is put back at random (race_on_test.go); make allocs runs this without it")
	}
	c, cc := newHeldClient(t)
	be := NewBackend(c, 1, nil)
	msgs := []*core.Message{{Body: bytes.Repeat([]byte{'s'}, 64<<10)}}
	var wg sync.WaitGroup
	send := func() {
		wg.Add(1)
		if err := be.SendAsync("q", msgs, func([]int64, error) { wg.Done() }); err != nil {
			t.Fatal(err)
		}
		cc.fc.pending = cc.fc.pending[:0]
	}
	send() // warm the pool
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		send()
	}
	runtime.ReadMemStats(&after)
	answerAll(cc, nil)
	wg.Wait()
	if per := int64(after.TotalAlloc-before.TotalAlloc) / runs; per > 16<<10 {
		t.Errorf("a routed send of a %d-byte message allocates %d bytes, want under %d", len(msgs[0].Body), per, 16<<10)
	}
}

// deadlineCounter counts the read deadlines set on its connection.
type deadlineCounter struct {
	net.Conn
	n atomic.Int64
}

func (c *deadlineCounter) SetReadDeadline(t time.Time) error {
	c.n.Add(1)
	return c.Conn.SetReadDeadline(t)
}

// Frames that arrive together are read with one read deadline, not one
// each; a read that waits for the peer still has one (silence from the
// moment it began to wait).
func TestReadSetsADeadlineOnlyBeforeWaiting(t *testing.T) {
	here, there := net.Pipe()
	t.Cleanup(func() { here.Close(); there.Close() })
	dc := &deadlineCounter{Conn: here}
	fc := newFrameConn(dc, nil)
	fc.silence = 50 * time.Millisecond
	const frames = 100
	var burst []byte
	for i := range frames {
		burst = binary.BigEndian.AppendUint32(burst, 8)
		burst = binary.BigEndian.AppendUint64(burst, uint64(i))
	}
	go there.Write(burst) // one write: the reader's buffer takes it whole
	var buf []byte
	for i := range frames {
		p, err := fc.read(buf)
		if err != nil || len(p) != 8 || binary.BigEndian.Uint64(p) != uint64(i) {
			t.Fatalf("frame %d: %x, %v", i, p, err)
		}
		buf = p
	}
	if n := dc.n.Load(); n > 2 {
		t.Errorf("reading %d frames that came in one write set the read deadline %d times, want at most 2", frames, n)
	}
	// Nothing more comes: the read that waits gives up after silence.
	if _, err := fc.read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a read with nothing coming ended with %v, want the deadline exceeded", err)
	}
}

// An asynchronous send under way holds no goroutine: its answer is
// handed to the client's pooled goroutines when it comes (one goroutine
// waited for each send's answer, its stack with it), and every send is
// answered, with its sequence numbers or as a broken connection.
func TestSendsUnderWayHoldNoGoroutine(t *testing.T) {
	c, cc := newHeldClient(t)
	be := NewBackend(c, 1, nil)
	msgs := []*core.Message{{Body: []byte("m")}}
	const sends = 200
	var wg sync.WaitGroup
	var answered, broken atomic.Int64
	start := runtime.NumGoroutine()
	for i := range sends {
		wg.Add(1)
		if err := be.SendAsync("q", msgs, func(seqs []int64, err error) {
			defer wg.Done()
			switch {
			case err == nil && len(seqs) == 1 && seqs[0] == 42:
				answered.Add(1)
			case err != nil:
				broken.Add(1)
			default:
				t.Errorf("send answered %v, %v", seqs, err)
			}
		}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if n := runtime.NumGoroutine() - start; n > sends/10 {
		t.Errorf("%d sends under way hold %d more goroutines, want at most %d", sends, n, sends/10)
	}
	// Half answered, the rest failed as a broken connection fails them.
	e := &enc{}
	e.byte(statusOK)
	e.int64s([]int64{42})
	cc.mu.Lock()
	half := 0
	for id, p := range cc.pending {
		if half == sends/2 {
			break
		}
		delete(cc.pending, id)
		p.deliver(cc.tasks, e.b)
		half++
	}
	cc.mu.Unlock()
	answerAll(cc, nil)
	wg.Wait()
	if answered.Load() != sends/2 || broken.Load() != sends/2 {
		t.Errorf("answered %d, failed %d, want %d each", answered.Load(), broken.Load(), sends/2)
	}
}
