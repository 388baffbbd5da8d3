package txnwire

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Session is one AMQP session of a Conn.
type Session struct {
	c       *Conn
	ch      uint16
	nextOut uint32           // the next delivery id we send
	nextIn  uint32           // the next transfer id we expect
	answers map[uint32]State // dispositions of our deliveries not yet asked for
}

// Begin begins a session.
func (c *Conn) Begin() (*Session, error) {
	ch := c.nextCh
	c.nextCh++
	if err := c.write(ch, 0, described(pBegin, nil, uint32(0), uint32(1<<20), uint32(1<<20), uint32(1023)), nil); err != nil {
		return nil, err
	}
	b, err := c.await(func(f frame) bool { return f.code == pBegin && f.ch == ch })
	if err != nil {
		return nil, err
	}
	next, _ := field(b.fields, 1).(uint32)
	return &Session{c: c, ch: ch, nextIn: next}, nil
}

// Link is an attached link.
type Link struct {
	s        *Session
	handle   uint32
	count    uint32 // a receiver's delivery count: initial plus received
	receiver bool
}

// attach attaches a link and returns it, or the error of the detach
// refusing it.
func (s *Session) attach(receiver bool, source, target any, props amqpMap) (*Link, error) {
	c := s.c
	h := c.handle
	c.handle++
	var p any
	if len(props) > 0 {
		p = props
	}
	var rcvMode, idc any
	if receiver {
		rcvMode = uint8(1) // second: peek-lock
	} else {
		idc = uint32(0)
	}
	name := fmt.Sprintf("txnwire-%d", h)
	if err := c.write(s.ch, 0, described(pAttach, name, h, receiver, nil, rcvMode, source, target, nil, nil, idc, nil, nil, nil, p), nil); err != nil {
		return nil, err
	}
	a, err := c.await(func(f frame) bool { return f.code == pAttach && f.ch == s.ch && field(f.fields, 1) == h })
	if err != nil {
		return nil, err
	}
	terminus := 6 // the endpoint's attach of our sender carries our target
	if receiver {
		terminus = 5
	}
	if field(a.fields, terminus) == nil {
		d, err := c.await(func(f frame) bool { return f.code == pDetach && f.ch == s.ch && field(f.fields, 0) == h })
		if err != nil {
			return nil, err
		}
		return nil, &RefusedError{Condition: condition(field(d.fields, 2)), Text: errorText(field(d.fields, 2))}
	}
	l := &Link{s: s, handle: h, receiver: receiver}
	l.count, _ = field(a.fields, 9).(uint32)
	return l, nil
}

// RefusedError is the endpoint's refusal of an attach.
type RefusedError struct {
	Condition string
	Text      string
}

func (e *RefusedError) Error() string { return "txnwire: attach refused: " + e.Text }

// AttachController attaches a transaction controller, as
// Microsoft.Azure.Amqp's Controller does: source a fresh name with
// distribution-mode move, target a coordinator without capabilities.
func (s *Session) AttachController() (*Link, error) {
	name := fmt.Sprintf("txnwire-controller-%d", s.c.handle)
	return s.attach(false, described(dSource, name, nil, nil, nil, nil, nil, amqpSymbol("move")), described(dCoordinator), nil)
}

// AttachSender attaches a sender to entity (addressed with the SDK's
// leading slash). via, if not "", is the entity its messages are stored
// in: Service Bus's send-via link property
// com.microsoft:transfer-destination-address.
func (s *Session) AttachSender(entity, via string) (*Link, error) {
	var props amqpMap
	if via != "" {
		props = amqpMap{{amqpSymbol("com.microsoft:transfer-destination-address"), via}}
	}
	return s.attach(false, described(dSource, fmt.Sprintf("txnwire-src-%d", s.c.handle)), described(dTarget, "/"+entity), props)
}

// AttachReceiver attaches a peek-lock receiver to entity and grants it
// credit.
func (s *Session) AttachReceiver(entity string, credit uint32) (*Link, error) {
	l, err := s.attach(true, described(dSource, "/"+entity), described(dTarget, fmt.Sprintf("txnwire-tgt-%d", s.c.handle)), nil)
	if err != nil {
		return nil, err
	}
	return l, l.Credit(credit)
}

// Credit sets a receiver's link credit to n.
func (l *Link) Credit(n uint32) error {
	s := l.s
	return s.c.write(s.ch, 0, described(pFlow, s.nextIn, uint32(1<<20), s.nextOut, uint32(1<<20), l.handle, l.count, n), nil)
}

// Delivery is a message received.
type Delivery struct {
	ID   uint32 // its delivery id, to settle it by
	Body []byte // its data sections, or its amqp-value if a string
}

// Receive waits for the next message on a receiver.
func (l *Link) Receive() (Delivery, error) {
	s := l.s
	c := s.c
	onLink := func(f frame) bool { return f.code == pTransfer && f.ch == s.ch && field(f.fields, 0) == l.handle }
	f, err := c.await(onLink)
	if err != nil {
		return Delivery{}, err
	}
	id, _ := field(f.fields, 1).(uint32)
	payload := f.payload
	for more, _ := field(f.fields, 5).(bool); more; more, _ = field(f.fields, 5).(bool) {
		if f, err = c.await(onLink); err != nil {
			return Delivery{}, err
		}
		payload = append(payload, f.payload...)
	}
	s.nextIn = id + 1
	l.count++
	d := Delivery{ID: id}
	for len(payload) > 0 {
		v, rest, err := decodeAMQP(payload)
		if err != nil {
			return Delivery{}, err
		}
		payload = rest
		sec, _ := v.(amqpDescribed)
		switch code, _ := sec.code.(uint64); code {
		case sData:
			b, _ := sec.value.([]byte)
			d.Body = append(d.Body, b...)
		case sValue:
			if str, ok := sec.value.(string); ok {
				d.Body = append(d.Body, str...)
			}
		}
	}
	return d, nil
}

// Transfer sends a message of one data section, inside transaction txn
// (nil: none), and returns its delivery id; Outcome waits for its answer.
func (l *Link) Transfer(txn []byte, body []byte) (uint32, error) {
	var state any
	if txn != nil {
		state = described(dTxnState, txn)
	}
	return l.transfer(state, appendAMQP(nil, amqpDescribed{code: uint64(sData), value: body}))
}

func (l *Link) transfer(state any, message []byte) (uint32, error) {
	s := l.s
	id := s.nextOut
	s.nextOut++
	s.c.tag++
	tag := binary.LittleEndian.AppendUint64(nil, s.c.tag)
	return id, s.c.write(s.ch, 0, described(pTransfer, l.handle, id, tag, uint32(0), false, false, nil, state), message)
}

// Outcome waits for the endpoint's disposition of our delivery id. One
// disposition may answer a range of deliveries: the others' states are
// kept for their own Outcome.
func (s *Session) Outcome(id uint32) (State, error) {
	for {
		if st, ok := s.answers[id]; ok {
			delete(s.answers, id)
			return st, nil
		}
		f, err := s.c.await(func(f frame) bool {
			return f.code == pDisposition && f.ch == s.ch && field(f.fields, 0) == true
		})
		if err != nil {
			return State{}, err
		}
		first, _ := field(f.fields, 1).(uint32)
		last, ok := field(f.fields, 2).(uint32)
		if !ok || last < first || last-first > 1<<16 {
			last = first
		}
		st := stateOf(field(f.fields, 4))
		if s.answers == nil {
			s.answers = map[uint32]State{}
		}
		for i := first; ; i++ {
			s.answers[i] = st
			if i == last {
				break
			}
		}
	}
}

// Send sends a message inside txn (nil: none) and waits for its answer.
func (l *Link) Send(txn []byte, body []byte) (State, error) {
	id, err := l.Transfer(txn, body)
	if err != nil {
		return State{}, err
	}
	return l.s.Outcome(id)
}

// Complete completes received delivery id — accepted, inside txn when
// txn is not nil — unsettled as the SDK settles in peek-lock, and waits
// for the endpoint's answer.
func (s *Session) Complete(id uint32, txn []byte) (State, error) {
	var state any = described(dAccepted)
	if txn != nil {
		state = described(dTxnState, txn, state)
	}
	if err := s.c.write(s.ch, 0, described(pDisposition, true, id, nil, false, state), nil); err != nil {
		return State{}, err
	}
	f, err := s.c.await(func(f frame) bool {
		first, _ := field(f.fields, 1).(uint32)
		return f.code == pDisposition && f.ch == s.ch && field(f.fields, 0) == false && first == id
	})
	if err != nil {
		return State{}, err
	}
	return stateOf(field(f.fields, 4)), nil
}

// Declare declares a transaction on a controller and returns its id.
func (l *Link) Declare() ([]byte, error) {
	id, err := l.transfer(nil, appendAMQP(nil, amqpDescribed{code: uint64(sValue), value: described(dDeclare)}))
	if err != nil {
		return nil, err
	}
	st, err := l.s.Outcome(id)
	if err != nil {
		return nil, err
	}
	if len(st.TxnID) == 0 {
		return nil, fmt.Errorf("txnwire: declare answered %s", st)
	}
	return st.TxnID, nil
}

// Discharge commits (fail false) or rolls back txn on a controller and
// returns the endpoint's answer.
func (l *Link) Discharge(txn []byte, fail bool) (State, error) {
	id, err := l.transfer(nil, appendAMQP(nil, amqpDescribed{code: uint64(sValue), value: described(dDischarge, txn, fail)}))
	if err != nil {
		return State{}, err
	}
	return l.s.Outcome(id)
}

// State is a delivery state the endpoint answered with.
type State struct {
	Accepted    bool   // accepted, alone or inside transactional-state
	Rejected    bool   // rejected, alone or inside transactional-state
	InTxn       bool   // inside transactional-state
	TxnID       []byte // of declared, or of the transactional-state
	Condition   string // a rejection's error condition
	Description string // and its description
	Code        uint64 // the (outer) state's descriptor code
}

func stateOf(v any) State {
	code, fields := describedCode(v)
	st := State{Code: code}
	switch code {
	case dDeclared:
		st.TxnID, _ = field(fields, 0).([]byte)
		return st
	case dTxnState:
		st.InTxn = true
		st.TxnID, _ = field(fields, 0).([]byte)
		code, fields = describedCode(field(fields, 1))
	}
	switch code {
	case dAccepted:
		st.Accepted = true
	case dRejected:
		st.Rejected = true
		_, e := describedCode(field(fields, 0))
		st.Condition = condition(field(fields, 0))
		st.Description, _ = field(e, 1).(string)
	}
	return st
}

// condition returns an AMQP error's condition.
func condition(v any) string {
	_, e := describedCode(v)
	sym, _ := field(e, 0).(amqpSymbol)
	return string(sym)
}

func (st State) String() string {
	var b strings.Builder
	switch {
	case st.Accepted:
		b.WriteString("accepted")
	case st.Rejected:
		fmt.Fprintf(&b, "rejected %s %q", st.Condition, st.Description)
	case st.Code == dDeclared:
		fmt.Fprintf(&b, "declared %q", st.TxnID)
	default:
		fmt.Fprintf(&b, "state 0x%x", st.Code)
	}
	if st.InTxn {
		fmt.Fprintf(&b, " (in transaction %q)", st.TxnID)
	}
	return b.String()
}
