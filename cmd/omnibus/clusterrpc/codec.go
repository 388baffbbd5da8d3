package clusterrpc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// Operations.
const (
	opSend byte = iota + 1
	opSendAsync
	opReceive
	opSettle
	opCompleteMany
	opRenewLock
	opReceiveDeferred
	opPeek
	opCancelScheduled
	opDeleteMessages
	opAcceptSession
	opRenewSessionLock
	opCloseSession
	opGetSessionState
	opSetSessionState
	opListSessions
	opSessions
	opCreateEntity
	opUpdateEntity
	opDeleteEntity
	opGetEntity
	opListEntities
	opAddRule
	opRemoveRule
	opListRules
	opCounts
	opEntityStats
	opTxnBegin
	opTxnSend
	opTxnSettle
	opTxnRenewLock
	opTxnCommit
	opTxnRollback
	opPlace    // the meta group's placement of a queue or topic (Server.Place)
	opCancel   // not a call: cancels the call with the frame's id
	opPing     // not a call: the server answers it at once (liveness)
	opAck      // not a call: the answer to the frame's id (a receive's locked messages) arrived
	opMeta     // another request to the meta group's leader, encoded by the caller (Server.Meta); last, so the ops before keep their numbers
	opTransfer // transfers from another group's outbox (core.Broker.ApplyTransfers); after opMeta for the same reason
	// opSessionEnded answers once a session lock ends (core.Broker.SessionLockEnded): the
	// caller's lock's Ended channel (Backend.watchSessionLock); after opTransfer for the same reason
	opSessionEnded
	opLast
)

// Answer statuses.
const (
	statusOK byte = iota
	statusError
)

// errMalformed is a frame that does not decode.
var errMalformed = errors.New("clusterrpc: malformed frame")

// enc appends values to a frame.
type enc struct {
	b   []byte
	err error
}

// maxPooledEnc bounds the buffer of an encoder kept for reuse (as the
// readers keep theirs, frame.go).
const maxPooledEnc = 1 << 20

// encPool holds encoders free for reuse. A call's arguments and an
// answer's result are copied into the connection's pending bytes
// (frameConn.writeFrame) as soon as they are encoded, so their buffer is
// free again at once; a fresh one grew message by message (each growth
// an allocation, a copy and the new part zeroed), which for a pull's
// answer of ten 1 KiB messages allocated 3.6 times its size.
var encPool = sync.Pool{New: func() any { return new(enc) }}

// getEnc returns an empty encoder from the pool; give it back with free
// once its bytes are queued.
func getEnc() *enc { return encPool.Get().(*enc) }

// free gives e back to the pool: neither e nor its bytes may be used
// after.
func (e *enc) free() {
	if cap(e.b) > maxPooledEnc {
		return
	}
	e.b, e.err = e.b[:0], nil
	encPool.Put(e)
}

func (e *enc) byte(v byte)      { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(v []byte)   { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) string(v string)  { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}
func (e *enc) time(t time.Time) {
	if t.IsZero() {
		e.varint(0)
		return
	}
	e.varint(t.UnixNano())
}
func (e *enc) token(t core.LockToken) { e.b = append(e.b, t[:]...) }

func (e *enc) value(v any) {
	if e.err != nil {
		return
	}
	e.b, e.err = core.AppendValue(e.b, v)
}

func (e *enc) json(v any) {
	if e.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.err = err
		return
	}
	e.bytes(b)
}

func (e *enc) message(m *core.Message) {
	if e.err != nil {
		return
	}
	e.b, e.err = core.AppendMessage(e.b, m)
}

func (e *enc) messages(ms []*core.Message) {
	e.uvarint(uint64(len(ms)))
	for _, m := range ms {
		e.message(m)
	}
}

func (e *enc) int64s(v []int64) {
	e.uvarint(uint64(len(v)))
	for _, x := range v {
		e.varint(x)
	}
}

func (e *enc) sessionLock(sl *core.SessionLock) {
	if sl == nil {
		e.bool(false)
		return
	}
	e.bool(true)
	e.string(sl.SessionID)
	e.token(sl.Token)
	e.time(sl.LockedUntil)
}

func (e *enc) outcome(o core.Outcome) {
	e.byte(byte(o.Kind))
	e.bool(o.Properties != nil)
	if o.Properties != nil {
		e.value(o.Properties)
	}
	e.string(o.DeadLetterReason)
	e.string(o.DeadLetterDescription)
}

// rule encodes a rule with its filter's property values typed (JSON
// would turn an int32 into a float).
func (e *enc) rule(r core.Rule) {
	e.string(r.Name)
	e.byte(byte(r.Filter.Kind))
	e.string(r.Filter.SQL)
	c := r.Filter.Correlation
	e.bool(c != nil)
	if c != nil {
		for _, s := range [...]string{c.CorrelationID, c.MessageID, c.To, c.ReplyTo, c.Subject, c.SessionID, c.ReplyToSessionID, c.ContentType} {
			e.string(s)
		}
		e.value(c.Properties)
	}
	e.string(r.Action)
	e.time(r.CreatedAt)
}

func (e *enc) rules(rs []core.Rule) {
	e.uvarint(uint64(len(rs)))
	for _, r := range rs {
		e.rule(r)
	}
}

// entity encodes an entity: its description as JSON (as the core stores
// it), its rules typed.
func (e *enc) entity(ent *core.Entity) {
	if ent == nil {
		e.bool(false)
		return
	}
	e.bool(true)
	rules := ent.Rules
	c := *ent
	c.Rules = nil
	e.json(c)
	e.rules(rules)
}

func (e *enc) error(err error) {
	var ce *core.Error
	if errors.As(err, &ce) {
		e.byte(byte(ce.Code))
		e.string(ce.Msg)
		return
	}
	e.byte(byte(core.CodeInternal))
	e.string(err.Error())
}

// dec reads values from a frame; the first failure sticks.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail() {
	if d.err == nil {
		d.err = errMalformed
	}
	d.b = nil
}

func (d *dec) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) raw(n uint64) []byte {
	if uint64(len(d.b)) < n {
		d.fail()
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) bytes() []byte {
	n := d.uvarint()
	v := d.raw(n)
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

func (d *dec) string() string { return string(d.raw(d.uvarint())) }
func (d *dec) bool() bool     { return d.byte() != 0 }

func (d *dec) time() time.Time {
	n := d.varint()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func (d *dec) token() core.LockToken {
	var t core.LockToken
	copy(t[:], d.raw(uint64(len(t))))
	return t
}

func (d *dec) value() any {
	if d.err != nil {
		return nil
	}
	v, rest, err := core.ReadValue(d.b)
	if err != nil {
		d.fail()
		return nil
	}
	d.b = rest
	return v
}

func (d *dec) json(v any) {
	b := d.raw(d.uvarint())
	if d.err != nil {
		return
	}
	if err := json.Unmarshal(b, v); err != nil {
		d.fail()
	}
}

func (d *dec) message() *core.Message {
	if d.err != nil {
		return nil
	}
	m, rest, err := core.ReadMessage(d.b)
	if err != nil {
		d.fail()
		return nil
	}
	d.b = rest
	return m
}

func (d *dec) messages() []*core.Message {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	out := make([]*core.Message, 0, n)
	for range n {
		m := d.message()
		if d.err != nil {
			return nil
		}
		out = append(out, m)
	}
	return out
}

func (d *dec) int64s() []int64 {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	out := make([]int64, 0, n)
	for range n {
		out = append(out, d.varint())
	}
	return out
}

func (d *dec) sessionLock() *core.SessionLock {
	if !d.bool() {
		return nil
	}
	return &core.SessionLock{SessionID: d.string(), Token: d.token(), LockedUntil: d.time()}
}

func (d *dec) outcome() core.Outcome {
	o := core.Outcome{Kind: core.OutcomeKind(d.byte())}
	if d.bool() {
		o.Properties, _ = d.value().(map[string]any)
	}
	o.DeadLetterReason = d.string()
	o.DeadLetterDescription = d.string()
	return o
}

func (d *dec) rule() core.Rule {
	r := core.Rule{Name: d.string()}
	r.Filter.Kind = core.FilterKind(d.byte())
	r.Filter.SQL = d.string()
	if d.bool() {
		c := &core.CorrelationFilter{}
		for _, p := range [...]*string{&c.CorrelationID, &c.MessageID, &c.To, &c.ReplyTo, &c.Subject, &c.SessionID, &c.ReplyToSessionID, &c.ContentType} {
			*p = d.string()
		}
		c.Properties, _ = d.value().(map[string]any)
		r.Filter.Correlation = c
	}
	r.Action = d.string()
	r.CreatedAt = d.time()
	return r
}

func (d *dec) rules() []core.Rule {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	var out []core.Rule
	for range n {
		out = append(out, d.rule())
	}
	return out
}

func (d *dec) entity() *core.Entity {
	if !d.bool() {
		return nil
	}
	var e core.Entity
	d.json(&e)
	e.Rules = d.rules()
	return &e
}

func (d *dec) error() error {
	code := core.Code(d.byte())
	msg := d.string()
	if d.err != nil {
		return d.err
	}
	return &core.Error{Code: code, Msg: msg}
}
