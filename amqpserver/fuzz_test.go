package amqpserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
)

// handshakePrefix is what a client sends to get an open connection
// without a validator: SASL ANONYMOUS, the AMQP header and open.
func handshakePrefix(t testing.TB) []byte {
	var b buffer.Buffer
	frames.WriteProtocolHeader(&b, frames.SASLHeader)
	if err := frames.Write(&b, frames.Frame{Body: &frames.SASLInit{Mechanism: "ANONYMOUS"}}); err != nil {
		t.Fatal(err)
	}
	frames.WriteProtocolHeader(&b, frames.AMQPHeader)
	if err := frames.Write(&b, frames.Frame{Body: &frames.Open{ContainerID: "fuzz"}}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// encodeFrames encodes frames on channel 0.
func encodeFrames(t testing.TB, bodies ...frames.Body) []byte {
	var b buffer.Buffer
	for _, body := range bodies {
		if err := frames.Write(&b, frames.Frame{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// Bounds on what one fuzzed connection may allocate in all (decoding, core,
// replies): connAllocFactor bytes per input byte plus connAllocBase for the
// connection itself (buffers, maps, channels, its logger). They are loose
// on purpose: they catch memory that is out of proportion to the input
// (issue 14's 63 KB frame took 437 MiB), not a few percent.
const (
	connAllocFactor = 256
	connAllocBase   = 1 << 20
)

// FuzzConn feeds arbitrary bytes to an open connection of a server without
// authentication, seeded with real Azure SDK conversations. Whatever the
// input, the connection must end without a panic once its peer closes,
// leave no goroutine behind, and allocate no more than connAllocFactor
// bytes per input byte (plus connAllocBase).
func FuzzConn(f *testing.F) {
	addConnSeeds(f)
	fuzzConn(f, nil)
}

// FuzzConnUnauthenticated is FuzzConn against a server that requires a
// token: the input runs on a connection that logged in with SASL ANONYMOUS
// and holds no token (unless the fuzzer replays one of the seeds' tokens),
// which is what anyone who can reach the port gets.
func FuzzConnUnauthenticated(f *testing.F) {
	addConnSeeds(f)
	v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{{KeyName: testKeyName, Key: testKey, Rights: sas.Manage}}})
	if err != nil {
		f.Fatal(err)
	}
	fuzzConn(f, v)
}

// addConnSeeds adds hand-written inputs and what the Go SDK sends after
// its open in a few conversations.
func addConnSeeds(f *testing.F) {
	id, format, one := uint32(0), uint32(0), uint32(1)
	h := uint32(0)
	second := frames.ReceiverSettleModeSecond
	f.Add(encodeFrames(f, beginFrame(), senderAttach("q"),
		&frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}, MessageFormat: &format, Payload: dataSection(f, 10)}))
	f.Add(encodeFrames(f, beginFrame(),
		&frames.Attach{Name: "r", Handle: 0, Role: frames.RoleReceiver, RcvSettleMode: &second, Source: &frames.Source{Address: "q"}, Target: &frames.Target{}},
		&frames.Flow{IncomingWindow: 10, OutgoingWindow: 10, Handle: &h, DeliveryCount: &id, LinkCredit: &one, Drain: true},
		&frames.Disposition{Role: frames.RoleReceiver, First: 0, Last: &one, Settled: true, State: &frames.Accepted{}}))
	f.Add(encodeFrames(f, beginFrame(), senderAttach("$cbs"),
		&frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}, MessageFormat: &format, More: true, Payload: []byte{0, 0x53}}))
	f.Add([]byte{0, 0, 0, 12, 2, 0, 0, 0, 0xc0, 0x01, 0x00, 0x00})
	for _, conv := range recordSDKConversations(f) {
		if rest := afterOpen(conv); len(rest) > 0 {
			f.Add(rest)
		}
	}
}

// fuzzConn runs the connection fuzz target against a server with the
// given validator (nil: no authentication).
func fuzzConn(f *testing.F, auth *sas.Validator) {
	env := coretest.New(f)
	// The entities the seeds use.
	entities := []core.Entity{{Kind: core.KindQueue, Name: "q"}, {Kind: core.KindQueue, Name: "sq", RequiresSession: true}}
	for _, e := range entities {
		env.MustCreate(f, e)
	}
	obs, logs := observer.New(zapcore.ErrorLevel)
	srv, err := New(Config{Broker: env.Broker, Logger: zap.New(obs), IdleTimeout: time.Second, Auth: auth})
	if err != nil {
		f.Fatal(err)
	}
	prefix := handshakePrefix(f)
	f.Cleanup(srv.cancel)

	// run serves one connection fed with input and returns once it ended.
	// The input is completed to whole frames and followed by a close, and
	// the peer hangs up only once the server answered that close: a peer
	// that hung up at once would leave the server dropping whatever frames
	// it had not handled yet, and the fuzzer would never get past them.
	run := func(t *testing.T, input []byte) {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			newConn(srv, server).serve(srv.ctx)
		}()
		closed := make(chan struct{})
		read := make(chan struct{})
		go func() {
			defer close(read)
			readServer(client, closed)
		}()
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(append(append([]byte(nil), prefix...), withClose(f, input)...))
		select {
		case <-closed:
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the server neither answered close nor ended the connection")
		}
		client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("connection did not end after its peer closed")
		}
		<-read
		for _, e := range logs.TakeAll() {
			if strings.Contains(e.Message, "panic") {
				t.Fatalf("%s: %v", e.Message, e.ContextMap())
			}
		}
		// Start every input from the same state: empty queues, no locks.
		for _, e := range entities {
			if c, err := env.Broker.Counts(e.Name); err == nil && c == (core.Counts{}) {
				continue
			}
			if err := env.Broker.DeleteEntity(context.Background(), e.Name); err != nil && !errors.Is(err, core.ErrNotFound) {
				t.Fatalf("resetting %s: %v", e.Name, err)
			}
			if _, err := env.Broker.CreateEntity(context.Background(), e); err != nil {
				t.Fatalf("resetting %s: %v", e.Name, err)
			}
		}
	}

	var count goroutineCounter
	f.Fuzz(func(t *testing.T, input []byte) {
		before := count.working()
		checkConnAllocs(t, len(input), func() { run(t, input) })
		count.wait(t, before)
	})
}

// withClose returns input completed to whole frames (a header cut short
// and the body of the last frame padded with zeros) and followed by a
// close frame. An input whose frames cannot be delimited (a size below the
// header's, or above any frame size the server accepts) is returned as it
// is: the server refuses it at once and closes.
func withClose(t testing.TB, input []byte) []byte {
	out := append([]byte(nil), input...)
	for rest := out; len(rest) > 0; {
		if len(rest) < frames.HeaderSize {
			out = append(out, make([]byte, frames.HeaderSize-len(rest))...)
			rest = out[len(out)-frames.HeaderSize:]
		}
		size := binary.BigEndian.Uint32(rest)
		if size < frames.HeaderSize || size > DefaultMaxFrameSize {
			return out
		}
		if int(size) > len(rest) {
			out = append(out, make([]byte, int(size)-len(rest))...)
			break
		}
		rest = rest[size:]
	}
	return append(out, encodeFrames(t, &frames.Close{})...)
}

// readServer reads what the server writes until it hangs up, closing
// closed when the server sends its close frame.
func readServer(c net.Conn, closed chan<- struct{}) {
	defer io.Copy(io.Discard, c) // whatever cannot be parsed
	r := frames.NewReader(c, 1<<30)
	if _, err := r.ReadProtocolHeader(); err != nil {
		return
	}
	for {
		fr, err := r.ReadFrame()
		if err != nil {
			return
		}
		switch fr.Body.(type) {
		case *frames.SASLOutcome:
			if _, err := r.ReadProtocolHeader(); err != nil {
				return
			}
		case *frames.Close:
			close(closed)
			return
		}
	}
}

// goroutineCounter counts the goroutines that are doing something: all
// of them but the idle workers that goroutine pools (the server's helpers,
// the core's) keep for later work. Telling those apart takes a stack dump,
// so the count is kept until the number of goroutines changes.
type goroutineCounter struct {
	total, workingN int // NumGoroutine at the last dump, and the count then
}

func (g *goroutineCounter) working() int {
	n := runtime.NumGoroutine()
	if n == g.total {
		return g.workingN
	}
	return g.recount(n)
}

// recount counts the working goroutines afresh, n of them in all. The
// count kept by working goes stale when a worker turns idle, or busy,
// while the number of goroutines stays the same.
func (g *goroutineCounter) recount(n int) int {
	idle := 0
	for _, stack := range strings.Split(string(allStacks()), "\n\n") {
		// An idle worker waits in the worker loop itself, not in a task.
		if lines := strings.SplitN(stack, "\n", 3); len(lines) >= 2 && strings.Contains(lines[1], "gopool.(*Pool).worker(") {
			idle++
		}
	}
	g.total, g.workingN = n, n-idle
	return g.workingN
}

// wait fails t unless the working goroutines come back to n within a
// deadline: a connection's goroutines end a moment after it does, and a
// pool worker turns idle a moment after its task, both later on a loaded
// machine. Each look counts afresh (a worker turning idle leaves the
// number of goroutines as it was); the deadline is one that only a
// goroutine that never ends misses.
func (g *goroutineCounter) wait(t *testing.T, n int) {
	deadline := time.Now().Add(30 * time.Second)
	for g.working() > n && g.recount(runtime.NumGoroutine()) > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left running after the connection ended (had %d):\n%s", g.workingN-n, n, allStacks())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// allStacks returns the stacks of every goroutine.
func allStacks() []byte {
	buf := make([]byte, 1<<20)
	return buf[:runtime.Stack(buf, true)]
}

// checkConnAllocs runs f, which serves a connection fed with n input
// bytes, and fails t if it allocated more than the connection's bound. f
// must leave the broker as it found it: an allocation by another goroutine
// of the fuzzing engine can land inside a measurement, so one over the
// bound is repeated, and only three in a row fail.
func checkConnAllocs(t *testing.T, n int, f func()) {
	if raceEnabled {
		f() // the race runtime pads allocations: no byte count means much
		return
	}
	limit := uint64(connAllocFactor*n + connAllocBase)
	var got uint64
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		if got = after.TotalAlloc - before.TotalAlloc; got <= limit {
			return
		}
	}
	t.Fatalf("a connection fed %d bytes allocated %d, more than %d", n, got, limit)
}

// afterOpen returns what a client sent after its open frame: the bytes the
// fuzz targets append to their own handshake.
func afterOpen(stream []byte) []byte {
	for len(stream) >= frames.HeaderSize {
		if bytes.HasPrefix(stream, []byte("AMQP")) {
			stream = stream[frames.ProtocolHeaderSize:]
			continue
		}
		size := binary.BigEndian.Uint32(stream)
		if size < frames.HeaderSize || int(size) > len(stream) {
			return nil
		}
		fr, err := frames.ParseFrame(stream[:size])
		stream = stream[size:]
		if _, ok := fr.Body.(*frames.Open); ok && err == nil {
			return stream
		}
	}
	return nil
}

// recordSDKConversations runs the official Go SDK against a server through
// a proxy that records what the client sends, and returns one recording
// per connection: a sender (single messages, a batch, a scheduled message),
// a receiver (settlements, lock renewal, peek) and a session receiver.
func recordSDKConversations(t testing.TB) [][]byte {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	rec := startRecorder(t, ts.addr)
	cs := "Endpoint=sb://" + rec.addr + ";SharedAccessKeyName=" + testKeyName + ";SharedAccessKey=" + testKey + ";UseDevelopmentEmulator=true"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must := func(what string, err error) {
		if err != nil {
			t.Fatalf("recording an SDK conversation: %s: %v", what, err)
		}
	}
	client := func() *azservicebus.Client {
		c, err := azservicebus.NewClientFromConnectionString(cs, nil)
		must("client", err)
		return c
	}

	sc := client()
	snd, err := sc.NewSender("q", nil)
	must("sender", err)
	id, subject, ttl := "m-1", "label", time.Minute
	must("send", snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("hello"), MessageID: &id, Subject: &subject, TimeToLive: &ttl,
		ApplicationProperties: map[string]any{"tenant": "contoso", "attempt": int32(1), "at": time.UnixMilli(1700000000000)}}, nil))
	batch, err := snd.NewMessageBatch(ctx, nil)
	must("batch", err)
	for _, body := range []string{"one", "two", "three"} {
		must("batch add", batch.AddMessage(&azservicebus.Message{Body: []byte(body)}, nil))
	}
	must("send batch", snd.SendMessageBatch(ctx, batch, nil))
	seqs, err := snd.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("later")}}, time.Now().Add(time.Hour), nil)
	must("schedule", err)
	must("cancel scheduled", snd.CancelScheduledMessages(ctx, seqs, nil))
	sessionID := "s1"
	ssnd, err := sc.NewSender("sq", nil)
	must("session sender", err)
	must("send to session", ssnd.SendMessage(ctx, &azservicebus.Message{Body: []byte("in session"), SessionID: &sessionID}, nil))
	must("close", sc.Close(ctx))

	rc := client()
	rcv, err := rc.NewReceiverForQueue("q", nil)
	must("receiver", err)
	_, err = rcv.PeekMessages(ctx, 2, nil)
	must("peek", err)
	msgs, err := rcv.ReceiveMessages(ctx, 3, nil)
	must("receive", err)
	if len(msgs) > 0 {
		must("renew lock", rcv.RenewMessageLock(ctx, msgs[0], nil))
		must("complete", rcv.CompleteMessage(ctx, msgs[0], nil))
	}
	if len(msgs) > 1 {
		must("abandon", rcv.AbandonMessage(ctx, msgs[1], nil))
	}
	if len(msgs) > 2 {
		must("dead-letter", rcv.DeadLetterMessage(ctx, msgs[2], nil))
	}
	must("close", rc.Close(ctx))

	sessc := client()
	sr, err := sessc.AcceptSessionForQueue(ctx, "sq", sessionID, nil)
	must("accept session", err)
	smsgs, err := sr.ReceiveMessages(ctx, 1, nil)
	must("receive from session", err)
	must("set session state", sr.SetSessionState(ctx, []byte("state"), nil))
	for _, m := range smsgs {
		must("complete in session", sr.CompleteMessage(ctx, m, nil))
	}
	must("close", sessc.Close(ctx))
	return rec.stop(t)
}

// recorder is a TCP proxy that keeps what each client sends.
type recorder struct {
	addr string
	ln   net.Listener
	wg   sync.WaitGroup

	mu    sync.Mutex
	convs []*bytes.Buffer // guarded by mu: one per connection, in accept order; each written by its proxy goroutine only
}

func startRecorder(t testing.TB, target string) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: ln.Addr().String(), ln: ln}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.wg.Add(1)
			go r.proxy(c, target)
		}
	}()
	return r
}

// proxy relays one connection to target, recording the client's bytes.
func (r *recorder) proxy(c net.Conn, target string) {
	defer r.wg.Done()
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	var conv bytes.Buffer
	r.mu.Lock()
	r.convs = append(r.convs, &conv)
	r.mu.Unlock()
	back := make(chan struct{})
	go func() {
		defer close(back)
		io.Copy(c, s)
		c.Close()
	}()
	io.Copy(s, io.TeeReader(c, &conv)) // conv is read only after wg.Wait
	s.Close()
	<-back
}

// stop closes the proxy, waits for its connections to end, and returns the
// recordings.
func (r *recorder) stop(t testing.TB) [][]byte {
	r.ln.Close()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the recording proxy's connections did not end")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]byte, len(r.convs))
	for i, c := range r.convs {
		out[i] = c.Bytes()
	}
	return out
}

// writeSeeds makes TestSDKTrafficWithinBudget write what it recorded into
// the frames package's seed corpora:
//
//	go test ./amqpserver -run TestSDKTrafficWithinBudget -write-seeds
var writeSeeds = flag.Bool("write-seeds", false, "write the recorded SDK frames and messages as fuzz seeds of amqpserver/internal/frames")

// TestSDKTrafficWithinBudget decodes every frame the Go SDK sends in the
// recorded conversations, and every message it transfers, checking that
// real traffic stays well inside the codec's allocation budget.
func TestSDKTrafficWithinBudget(t *testing.T) {
	seen := map[string]bool{}
	var frameSeeds, messageSeeds [][]byte
	worst := 0.0
	for _, conv := range recordSDKConversations(t) {
		for rest := conv; len(rest) >= frames.HeaderSize; {
			if bytes.HasPrefix(rest, []byte("AMQP")) {
				rest = rest[frames.ProtocolHeaderSize:]
				continue
			}
			size := binary.BigEndian.Uint32(rest)
			if size < frames.HeaderSize || int(size) > len(rest) {
				t.Fatalf("recorded stream has a frame of %d bytes with %d left", size, len(rest))
			}
			raw := rest[:size]
			rest = rest[size:]
			var fr frames.Frame
			var err error
			got := bytesAllocatedOnce(func() { fr, err = frames.ParseFrame(raw) })
			if err != nil {
				t.Fatalf("the SDK sent a frame we cannot decode: %v\n% x", err, raw)
			}
			worst = max(worst, float64(got)/float64(len(raw)))
			kind := fmt.Sprintf("%T", fr.Body)
			if tr, ok := fr.Body.(*frames.Transfer); ok && len(tr.Payload) > 0 {
				var m *frames.Message
				got := bytesAllocatedOnce(func() { m, err = frames.UnmarshalMessage(tr.Payload) })
				if err != nil {
					t.Fatalf("the SDK sent a message we cannot decode: %v\n% x", err, tr.Payload)
				}
				worst = max(worst, float64(got)/float64(len(tr.Payload)))
				mkind := fmt.Sprintf("message %d %v %v", m.BodyKind, m.Properties != nil, len(m.ApplicationProperties))
				if !seen[mkind] {
					seen[mkind] = true
					messageSeeds = append(messageSeeds, tr.Payload)
				}
			}
			if !seen[kind+fmt.Sprint(len(raw)/64)] {
				seen[kind+fmt.Sprint(len(raw)/64)] = true
				frameSeeds = append(frameSeeds, raw)
			}
		}
	}
	t.Logf("the most any SDK frame or message cost to decode: %.1f bytes per byte", worst)
	if !raceEnabled && worst > encoding.AllocFactor/2 {
		t.Errorf("real traffic costs %.1f bytes per byte to decode, more than half the budget (%d)", worst, encoding.AllocFactor)
	}
	if *writeSeeds {
		writeCorpus(t, "internal/frames/testdata/fuzz/FuzzFrame", "sdk_frame", frameSeeds)
		writeCorpus(t, "internal/frames/testdata/fuzz/FuzzMessage", "sdk_message", messageSeeds)
	}
}

// bytesAllocatedOnce returns what f allocated, in bytes: the least of
// three calls, so that another goroutine's allocation landing in one
// measurement does not count.
func bytesAllocatedOnce(f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// writeCorpus writes seeds as Go fuzz corpus files named prefix_N in dir.
func writeCorpus(t *testing.T, dir, prefix string, seeds [][]byte) {
	for i, s := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s_%02d", prefix, i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d seeds to %s", len(seeds), dir)
}

// nestedNullArrays encodes an array of k arrays of count nulls each: nine
// bytes per inner array, which once cost 64 KiB each to decode.
func nestedNullArrays(k, count int) encoding.Raw {
	be := binary.BigEndian.AppendUint32
	p := append(be(be([]byte{encoding.TypeCodeArray32}, uint32(5+9*k)), uint32(k)), encoding.TypeCodeArray32)
	for range k {
		p = append(be(be(p, 5), uint32(count)), encoding.TypeCodeNull)
	}
	return p
}

// TestHostileValuesAnswerDecodeError sends issue 14's kind of input over a
// real socket: values whose decoding used to cost thousands of times their
// size. A frame of them closes its connection with amqp:decode-error, a
// message of them is rejected with it, and the server stays usable.
func TestHostileValuesAnswerDecodeError(t *testing.T) {
	ts := newTestServer(t, nil)
	bomb := func(size int) encoding.Map {
		return encoding.Map{{Key: encoding.Symbol("a"), Value: nestedNullArrays(size/9, 4096)}}
	}

	anonymous := func() *rawPeer {
		p := ts.rawDial(t)
		p.writeHeader(frames.SASLHeader)
		p.readHeader()
		p.readFrame() // mechanisms
		p.writeFrame(0, &frames.SASLInit{Mechanism: "ANONYMOUS"})
		if o, ok := p.readFrame().(*frames.SASLOutcome); !ok || o.Code != frames.SASLOK {
			t.Fatalf("SASL outcome %+v", o)
		}
		p.writeHeader(frames.AMQPHeader)
		p.readHeader()
		return p
	}

	// Beyond the 16 KiB allowed before a token, an open is not even read.
	p := anonymous()
	p.writeFrame(0, &frames.Open{ContainerID: "hostile", Properties: bomb(20000)})
	p.readFrame() // the server's open
	if e := p.expectClose(); e == nil || e.Condition != frames.CondFrameSizeTooSmall {
		t.Fatalf("close %+v, want amqp:frame-size-too-small", e)
	}

	// Right after SASL ANONYMOUS, within those 16 KiB: an open whose
	// properties would have taken 116 MB.
	p = anonymous()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p.writeFrame(0, &frames.Open{ContainerID: "hostile", Properties: bomb(15000)})
	p.readFrame() // the server's open
	if e := p.expectClose(); e == nil || e.Condition != frames.CondDecodeError {
		t.Fatalf("close %+v, want amqp:decode-error", e)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; !raceEnabled && got > 8<<20 {
		t.Errorf("the server allocated %d bytes for a 15 KB frame", got)
	}

	// Logged in, with 64 KiB frames: an attach whose properties nest them.
	p = ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	a := senderAttach("q")
	a.Properties = bomb(63000)
	p.writeFrame(0, a)
	if e := p.expectClose(); e == nil || e.Condition != frames.CondDecodeError {
		t.Fatalf("close %+v, want amqp:decode-error", e)
	}

	// A message whose application properties nest them is rejected; the
	// link goes on, and the next message is stored.
	p = ts.rawDial(t)
	p.open()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(0, senderAttach("q"))
	p.readFrame() // attach
	p.readFrame() // flow with credit
	var msg buffer.Buffer
	if err := (&frames.Message{ApplicationProperties: encoding.Map{{Key: "a", Value: nestedNullArrays(6000, 4096)}}, Data: [][]byte{{1}}}).MarshalAMQP(&msg); err != nil {
		t.Fatal(err)
	}
	id, format := uint32(0), uint32(0)
	payload := msg.Bytes()
	p.writeFrame(0, &frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}, MessageFormat: &format, More: true, Payload: payload[:len(payload)/2]})
	p.writeFrame(0, &frames.Transfer{Handle: 0, Payload: payload[len(payload)/2:]})
	d, ok := p.readFrame().(*frames.Disposition)
	if !ok {
		t.Fatalf("got %T, want a disposition", d)
	}
	if rej, ok := d.State.(*frames.Rejected); !ok || rej.Error == nil || rej.Error.Condition != frames.CondDecodeError {
		t.Fatalf("state %+v, want rejected with amqp:decode-error", d.State)
	}
	id = 1
	p.writeFrame(0, &frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{2}, MessageFormat: &format, Payload: dataSection(t, 10)})
	if d, ok := p.readFrame().(*frames.Disposition); !ok {
		t.Fatalf("got %T, want a disposition", d)
	} else if _, ok := d.State.(*frames.Accepted); !ok {
		t.Fatalf("state %+v, want accepted", d.State)
	}
	if c := ts.MustCounts(t, "q"); c.Active != 1 {
		t.Errorf("queue holds %d messages, want 1", c.Active)
	}
}
