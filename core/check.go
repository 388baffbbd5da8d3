package core

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/omnibusmq/omnibus/storage"
)

// The consistency checker.
//
// Check compares the broker's memory with its store, record by record:
// the registry with the entity records, each subscription's rules with its
// rule records, each queue's index (where every message is, the counts
// management reports, bytes, sessions) with its state records, each
// topic's body reference counts with the state records pointing at its
// bodies, every state record with its body (present and readable), and
// every body with a state record that needs it. Tests run it after every
// step of the golden scripts and after every injected storage fault;
// `omnibus check` and `--check-consistency` run it on a data directory.
//
// It reads every record, bodies included, so it costs a full scan of the
// store. It expects a quiet broker: a write in flight meanwhile can show
// as a difference.
//
// Two differences are allowed by design: a delivery count in memory ahead
// of the store (delivery counts are written lazily; a failed write is
// made good by the message's next state change), and a scheduled record
// whose time has passed stored as scheduled while memory has activated it
// (recovery activates it the same way).

// CheckError lists the inconsistencies [Broker.Check] found.
type CheckError struct {
	Findings []string
}

func (e *CheckError) Error() string {
	const show = 5
	s := fmt.Sprintf("core: %d consistency finding(s): %s", len(e.Findings), strings.Join(e.Findings[:min(show, len(e.Findings))], "; "))
	if len(e.Findings) > show {
		s += "; …"
	}
	return s
}

// Check compares the broker's memory with its store and returns a
// *[CheckError] listing every difference, or nil. Run it on a quiet
// broker (see the package's check.go for what it checks).
func (b *Broker) Check() error {
	c := &checker{
		b:       b,
		now:     b.Now(),
		present: make(map[bodyKey]bool),
		needed:  make(map[bodyKey]int),
		shared:  make(map[uint64]map[int64]int32),
	}
	ents := b.entities()
	sort.Slice(ents, func(i, j int) bool { return ents[i].key < ents[j].key })
	c.entities(ents)
	// Partitions hold the messages of a partitioned entity.
	var units []*entity
	for _, e := range ents {
		units = append(units, e.units()...)
	}
	for _, e := range units {
		c.bodies(e.id)
		if e.q != nil {
			c.bodies(e.id | dlqBit)
		}
	}
	for _, e := range units {
		if e.q != nil {
			c.queue(e.q)
			c.queue(e.q.dead)
		}
		if e.in != nil {
			c.inlet(e)
		}
	}
	for _, e := range units {
		if e.desc.Load().Kind == KindTopic {
			c.refs(e)
		}
	}
	c.orphans()
	if len(c.findings) == 0 {
		return nil
	}
	return &CheckError{Findings: c.findings}
}

type bodyKey struct {
	owner uint64
	seq   int64
}

type checker struct {
	b        *Broker
	now      int64
	findings []string
	present  map[bodyKey]bool           // body records found (scanned owners)
	scanned  map[uint64]bool            // owners whose bodies were scanned
	needed   map[bodyKey]int            // body records state records point at
	shared   map[uint64]map[int64]int32 // topic id → seq → state records using its body
	owners   map[uint64]string          // id → entity path, for messages
}

func (c *checker) addf(format string, args ...any) {
	c.findings = append(c.findings, fmt.Sprintf(format, args...))
}

// entities compares the registry with the entity and rule records.
func (c *checker) entities(ents []*entity) {
	c.owners = make(map[uint64]string)
	live := make(map[string]*entity, len(ents))
	for _, e := range ents {
		live[e.key] = e
		for _, u := range e.units() {
			c.owners[u.id] = u.key
			c.owners[u.id|dlqBit] = u.key + "/$deadletterqueue"
		}
	}
	stored := make(map[string]bool)
	err := c.b.store.Scan([]byte{tabEntity}, nil, func(k, v []byte) (bool, error) {
		key := string(k[1:])
		stored[key] = true
		var r entityRecord
		if err := json.Unmarshal(v, &r); err != nil {
			c.addf("entity record %q cannot be read: %v", key, err)
			return true, nil
		}
		e := live[key]
		switch {
		case e == nil:
			c.addf("entity %q is stored but not in memory", key)
		case e.id != r.ID:
			c.addf("entity %q: id %d in memory, %d in the store", key, e.id, r.ID)
		case e.desc.Load().Kind != r.Entity.Kind:
			c.addf("entity %q: a %s in memory, a %s in the store", key, e.desc.Load().Kind, r.Entity.Kind)
		case !slices.Equal(e.partIDs(), r.Parts):
			c.addf("entity %q: partitions %v in memory, %v in the store", key, e.partIDs(), r.Parts)
		}
		return true, nil
	})
	c.scanErr("entity records", err)
	for _, e := range ents {
		if !stored[e.key] {
			c.addf("entity %q is in memory but not stored", e.key)
		}
		if e.desc.Load().Kind == KindSubscription {
			c.rules(e)
		}
	}
}

func (c *checker) rules(e *entity) {
	mem := make(map[string]bool)
	for _, r := range e.currentRules() {
		mem[strings.ToLower(r.Name)] = true
	}
	err := c.b.store.Scan(idKey(tabRule, e.id), nil, func(k, v []byte) (bool, error) {
		name := string(k[9:])
		if !mem[name] {
			c.addf("subscription %q: rule %q is stored but not in memory", e.key, name)
		}
		delete(mem, name)
		return true, nil
	})
	c.scanErr("rules of "+e.key, err)
	for name := range mem {
		c.addf("subscription %q: rule %q is in memory but not stored", e.key, name)
	}
}

// bodies scans the body records of one owner, noting which exist and
// reporting those that cannot be decoded.
func (c *checker) bodies(owner uint64) {
	if c.scanned == nil {
		c.scanned = make(map[uint64]bool)
	}
	c.scanned[owner] = true
	err := c.b.store.Scan(idKey(tabBody, owner), nil, func(k, v []byte) (bool, error) {
		seq := seqFromKey(k)
		c.present[bodyKey{owner, seq}] = true
		if err := checkBody(v); err != nil {
			c.addf("%s: the body of message %d cannot be read: %v", c.owners[owner], seq, err)
		}
		return true, nil
	})
	c.scanErr("bodies of "+c.owners[owner], err)
}

// checkBody reports whether body record v cannot be read, its encoded
// properties included (which a delivery passes on without decoding).
func checkBody(v []byte) error {
	m, err := decodeBody(v)
	if err == nil {
		_, err = m.Properties()
	}
	return err
}

func (c *checker) scanErr(what string, err error) {
	if err != nil {
		c.addf("reading %s failed: %v", what, err)
	}
}

// memRec is where a record sits in memory.
type memRec struct {
	r     *msgRec
	where string
}

// queue compares one queue's index with its state records.
func (c *checker) queue(q *queue) {
	mem, counts := c.snapshot(q)
	stored := make(map[int64]bool)
	err := c.b.store.Scan(idKey(tabState, q.id), nil, func(k, v []byte) (bool, error) {
		seq := seqFromKey(k)
		stored[seq] = true
		st, err := decodeState(v)
		if err != nil {
			c.addf("%s: the state record of message %d cannot be read: %v", q.path, seq, err)
			return true, nil
		}
		c.needBody(q, seq, st)
		m, ok := mem[seq]
		if !ok {
			c.addf("%s: message %d is stored (%s) but not in memory", q.path, seq, st.state)
			return true, nil
		}
		c.compare(q, seq, m, st)
		return true, nil
	})
	c.scanErr("state records of "+q.path, err)
	for seq, m := range mem {
		if !stored[seq] {
			c.addf("%s: message %d is in memory (%s) but not stored", q.path, seq, m.where)
		}
	}
	c.counts(q, mem, counts)
	if q.desc().RequiresSession && !q.isDeadLetter() {
		c.sessionStates(q, counts.states)
	}
}

// queueCounts are a queue's counters as memory keeps them.
type queueCounts struct {
	active, deferred, scheduled, bytes int64
	sessions                           map[string]int    // session → messages
	states                             map[string][]byte // session → state
}

// snapshot copies q's index: every record by sequence number, with where
// it sits, and the counters. A record found in two places is reported.
func (c *checker) snapshot(q *queue) (map[int64]memRec, queueCounts) {
	mem := make(map[int64]memRec)
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, f := range q.timerFindingsLocked() { // timer.go
		c.addf("%s: %s", q.path, f)
	}
	add := func(r *msgRec, where string) {
		if prev, ok := mem[r.seq]; ok {
			c.addf("%s: message %d is in memory twice (%s and %s)", q.path, r.seq, prev.where, where)
		}
		cp := *r
		mem[r.seq] = memRec{r: &cp, where: where}
	}
	for _, r := range q.mu.avail {
		add(r, "available")
		if r.locked() {
			c.addf("%s: message %d is available and locked", q.path, r.seq)
		}
	}
	for _, s := range q.mu.sessions.byID {
		for _, r := range s.avail {
			add(r, "available in session "+s.id)
		}
	}
	for tok, r := range q.mu.locked {
		if r.lock != tok {
			c.addf("%s: message %d is listed under a lock it does not hold", q.path, r.seq)
		}
		if r.state != StateDeferred {
			add(r, "locked")
		}
	}
	for seq, r := range q.mu.deferred {
		if r.seq != seq || r.state != StateDeferred {
			c.addf("%s: message %d is in the deferred list but %s", q.path, r.seq, r.state)
		}
		add(r, "deferred")
	}
	for seq, r := range q.mu.scheduled {
		if r.seq != seq || r.state != StateScheduled {
			c.addf("%s: message %d is in the schedule but %s", q.path, r.seq, r.state)
		}
		add(r, "scheduled")
	}
	for _, r := range q.mu.expiring {
		add(r, "set aside to expire")
	}
	counts := queueCounts{active: q.mu.activeN, deferred: q.mu.deferredN,
		scheduled: int64(len(q.mu.scheduled)), bytes: q.mu.bytes,
		sessions: make(map[string]int), states: make(map[string][]byte)}
	if q.desc().RequiresSession && !q.isDeadLetter() {
		for id, s := range q.mu.sessions.byID {
			counts.sessions[id] = s.count
			counts.states[id] = append([]byte(nil), s.state...)
			if s.state == nil {
				counts.states[id] = nil
			}
		}
	}
	return mem, counts
}

// compare checks a record in memory against its stored state.
func (c *checker) compare(q *queue, seq int64, m memRec, st stateRec) {
	r := m.r
	state := st.state
	if state == StateScheduled && r.state == StateActive && st.scheduledAt <= c.now {
		state = StateActive // activated; recovery would do the same
	}
	if r.state != state {
		c.addf("%s: message %d is %s in memory, %s in the store", q.path, seq, r.state, st.state)
	}
	if r.deliveryCount < st.deliveryCount {
		c.addf("%s: message %d has delivery count %d in memory, %d in the store", q.path, seq, r.deliveryCount, st.deliveryCount)
	}
	if r.owner != st.owner {
		c.addf("%s: message %d has its body under %s in memory, %s in the store", q.path, seq, c.ownerName(r.owner), c.ownerName(st.owner))
	}
	if r.size != st.size || r.sessionID != st.sessionID || r.expiresAt != st.expiresAt || r.scheduledAt != st.scheduledAt {
		c.addf("%s: message %d differs: memory %+v, store %+v", q.path, seq, r.stateRec, st)
	}
}

func (c *checker) ownerName(id uint64) string {
	if n, ok := c.owners[id]; ok {
		return n
	}
	return fmt.Sprintf("id %d", id)
}

// needBody notes that a state record points at a body.
func (c *checker) needBody(q *queue, seq int64, st stateRec) {
	k := bodyKey{st.owner, seq}
	c.needed[k]++
	if q.shared != nil && st.owner == q.shared.id {
		m := c.shared[st.owner]
		if m == nil {
			m = make(map[int64]int32)
			c.shared[st.owner] = m
		}
		m[seq]++
	} else if c.needed[k] > 1 {
		c.addf("%s: message %d shares a body that is not a topic's", q.path, seq)
	}
	if c.scanned[st.owner] {
		if !c.present[k] {
			c.addf("%s: the body of message %d is missing", q.path, seq)
		}
		return
	}
	v, err := c.b.store.Get(seqKey(tabBody, st.owner, seq))
	if err == nil {
		err = checkBody(v)
	}
	if err != nil {
		c.addf("%s: the body of message %d (under %s) cannot be read: %v", q.path, seq, c.ownerName(st.owner), err)
	}
}

// counts checks the counters management reports against the records.
func (c *checker) counts(q *queue, mem map[int64]memRec, got queueCounts) {
	var want queueCounts
	want.sessions = make(map[string]int)
	for _, m := range mem {
		switch m.r.state {
		case StateDeferred:
			want.deferred++
		case StateScheduled:
			want.scheduled++
		default:
			want.active++
		}
		want.bytes += m.r.storedBytes() // what it counts towards the quota (quota.go)
		if len(got.sessions) > 0 || (q.desc().RequiresSession && !q.isDeadLetter()) {
			want.sessions[m.r.sessionID]++
		}
	}
	for _, st := range got.states {
		want.bytes += int64(len(st)) // session state counts too
	}
	if got.active != want.active || got.deferred != want.deferred || got.scheduled != want.scheduled || got.bytes != want.bytes {
		c.addf("%s: counts active/deferred/scheduled/bytes are %d/%d/%d/%d, the records make %d/%d/%d/%d", q.path,
			got.active, got.deferred, got.scheduled, got.bytes, want.active, want.deferred, want.scheduled, want.bytes)
	}
	for id, n := range want.sessions {
		if got.sessions[id] != n {
			c.addf("%s: session %q counts %d messages, holds %d", q.path, id, got.sessions[id], n)
		}
	}
	for id, n := range got.sessions {
		if _, ok := want.sessions[id]; !ok && n != 0 {
			c.addf("%s: session %q counts %d messages, holds none", q.path, id, n)
		}
	}
}

// sessionStates compares the sessions' states in memory with the stored
// ones.
func (c *checker) sessionStates(q *queue, mem map[string][]byte) {
	seen := make(map[string]bool)
	err := c.b.store.Scan(idKey(tabSession, q.id), nil, func(k, v []byte) (bool, error) {
		id := string(k[9:])
		seen[id] = true
		state, ok := mem[id]
		switch {
		case !ok:
			c.addf("%s: session %q has stored state but is not in memory", q.path, id)
		case state == nil:
			c.addf("%s: session %q has stored state but none in memory", q.path, id)
		case len(v) < 8 || string(v[8:]) != string(state):
			c.addf("%s: session %q has a different state in memory and in the store", q.path, id)
		}
		return true, nil
	})
	c.scanErr("session states of "+q.path, err)
	for id, state := range mem {
		if state != nil && !seen[id] {
			c.addf("%s: session %q has state in memory but none stored", q.path, id)
		}
	}
}

// inlet checks that no stored message has a sequence number the inlet
// would hand out again, and that the duplicate history in memory is
// stored.
func (c *checker) inlet(e *entity) {
	in := e.in
	in.mu.Lock()
	next, durable := in.next, in.durable
	ids := make([]string, 0, len(in.dedup.seen))
	for id := range in.dedup.seen {
		ids = append(ids, id)
	}
	in.mu.Unlock()
	if v, err := c.b.store.Get(idKey(tabSeq, e.id)); err == nil && len(v) == 8 {
		if stored := int64(binary.BigEndian.Uint64(v)); stored < durable {
			c.addf("entity %q: sequence numbers are reserved up to %d in memory, %d in the store", e.key, durable, stored)
		}
	} else if durable > 0 && err != nil && !errors.Is(err, storage.ErrNotFound) {
		c.addf("entity %q: the sequence reservation cannot be read: %v", e.key, err)
	}
	if e.q != nil {
		for _, id := range []uint64{e.q.id, e.q.dead.id} {
			err := c.b.store.Scan(idKey(tabState, id), nil, func(k, v []byte) (bool, error) {
				if seq := seqFromKey(k); seq >= next {
					c.addf("entity %q: message %d is stored but the next sequence number is %d", e.key, seq, next)
				}
				return true, nil
			})
			c.scanErr("sequence numbers of "+e.key, err)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, err := c.b.store.Get(nameKey(tabDedup, e.id, id)); err != nil {
			c.addf("entity %q: message id %q is in the duplicate history in memory but not stored (%v)", e.key, id, err)
		}
	}
}

// refs compares a topic's body reference counts with the state records
// that point at its bodies.
func (c *checker) refs(t *entity) {
	want := c.shared[t.id]
	t.refs.Lock()
	got := make(map[int64]bodyRefs, len(t.refs.m))
	for seq, r := range t.refs.m {
		got[seq] = r
	}
	t.refs.Unlock()
	for seq, r := range got {
		if r.releasing != 0 {
			c.addf("topic %q: body %d has %d releases in flight", t.key, seq, r.releasing)
		}
		if r.n != want[seq] {
			c.addf("topic %q: body %d counts %d references, %d copies point at it", t.key, seq, r.n, want[seq])
		}
	}
	for seq, n := range want {
		if _, ok := got[seq]; !ok {
			c.addf("topic %q: body %d counts no reference, %d copies point at it", t.key, seq, n)
		}
	}
}

// orphans reports bodies no state record points at: garbage (a crash or
// a failed write between a copy's removal and its body's).
func (c *checker) orphans() {
	pending := c.b.pendingOrphans() // known, to be deleted
	var keys []bodyKey
	for k := range c.present {
		if c.needed[k] == 0 && !pending[string(seqKey(tabBody, k.owner, k.seq))] {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].owner != keys[j].owner {
			return keys[i].owner < keys[j].owner
		}
		return keys[i].seq < keys[j].seq
	})
	for _, k := range keys {
		c.addf("%s: the body of message %d is stored but no message needs it", c.ownerName(k.owner), k.seq)
	}
}
