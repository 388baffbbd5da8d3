package core_test

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// scriptRunner executes golden-script commands. Lock tokens print as #n
// and session locks as $n, numbered in order of first appearance, so the
// output is deterministic; times print relative to coretest.Epoch.
type scriptRunner struct {
	t        *testing.T
	env      *coretest.Env
	locks    map[core.LockToken]string
	byName   map[string]core.LockToken
	sessions map[string]*core.SessionLock
}

func newScriptRunner(t *testing.T) *scriptRunner {
	return &scriptRunner{
		t:        t,
		env:      coretest.New(t),
		locks:    make(map[core.LockToken]string),
		byName:   make(map[string]core.LockToken),
		sessions: make(map[string]*core.SessionLock),
	}
}

// args is a parsed command: positional words and key=value options.
type args struct {
	pos  []string
	opts map[string]string
	err  error
}

func parseArgs(words []string) *args {
	a := &args{opts: make(map[string]string)}
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok {
			a.opts[k] = v
		} else {
			a.pos = append(a.pos, w)
		}
	}
	return a
}

// has reports whether k was given as an option or as a bare flag word.
func (a *args) has(k string) bool {
	if _, ok := a.opts[k]; ok {
		return true
	}
	for _, p := range a.pos {
		if p == k {
			return true
		}
	}
	return false
}

func (a *args) str(k string) string { return a.opts[k] }

func (a *args) dur(k string) time.Duration {
	v, ok := a.opts[k]
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimPrefix(v, "+"))
	if err != nil && a.err == nil {
		a.err = fmt.Errorf("%s: %v", k, err)
	}
	return d
}

func (a *args) int(k string, def int) int {
	v, ok := a.opts[k]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil && a.err == nil {
		a.err = fmt.Errorf("%s: %v", k, err)
	}
	return n
}

func (a *args) seqs(k string) []int64 {
	var out []int64
	for _, s := range strings.Split(a.opts[k], ",") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil && a.err == nil {
			a.err = fmt.Errorf("%s: %v", k, err)
		}
		out = append(out, n)
	}
	return out
}

// props parses k:type:value,k2:type:value.
func (a *args) props(k string) map[string]any {
	v, ok := a.opts[k]
	if !ok {
		return nil
	}
	out := make(map[string]any)
	for _, p := range strings.Split(v, ",") {
		parts := strings.SplitN(p, ":", 3)
		if len(parts) != 3 {
			a.err = fmt.Errorf("property %q: want name:type:value", p)
			return nil
		}
		val, err := parseTyped(parts[1], parts[2])
		if err != nil {
			a.err = err
			return nil
		}
		out[parts[0]] = val
	}
	return out
}

func parseTyped(typ, s string) (any, error) {
	bits := map[string]int{"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
	switch {
	case typ == "string":
		return s, nil
	case typ == "symbol":
		return core.Symbol(s), nil
	case typ == "bool":
		return strconv.ParseBool(s)
	case typ == "float64":
		return strconv.ParseFloat(s, 64)
	case typ == "float32":
		f, err := strconv.ParseFloat(s, 32)
		return float32(f), err
	case typ == "bytes":
		return hex.DecodeString(s)
	case typ == "uuid":
		return core.ParseUUID(s)
	case typ == "time":
		d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
		return coretest.Epoch.Add(d), err
	case strings.HasPrefix(typ, "int"):
		n, err := strconv.ParseInt(s, 10, bits[typ])
		switch typ {
		case "int8":
			return int8(n), err
		case "int16":
			return int16(n), err
		case "int32":
			return int32(n), err
		}
		return n, err
	case strings.HasPrefix(typ, "uint"):
		n, err := strconv.ParseUint(s, 10, bits[typ])
		switch typ {
		case "uint8":
			return uint8(n), err
		case "uint16":
			return uint16(n), err
		case "uint32":
			return uint32(n), err
		}
		return n, err
	}
	return nil, fmt.Errorf("unknown property type %q", typ)
}

func formatTyped(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case string:
		return "string:" + x
	case core.Symbol:
		return "symbol:" + string(x)
	case []byte:
		return "bytes:" + hex.EncodeToString(x)
	case core.UUID:
		return "uuid:" + x.String()
	case time.Time:
		return "time:" + rel(x)
	case time.Duration:
		return "duration:" + x.String()
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// rel formats t relative to the epoch.
func rel(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return "+" + t.Sub(coretest.Epoch).String()
}

func (r *scriptRunner) run(line string) string {
	words := splitArgs(line)
	a := parseArgs(words[1:])
	out, err := r.exec(words[0], a)
	if a.err != nil {
		r.t.Fatalf("%s: bad arguments: %v", line, a.err)
	}
	core.Quiesce(r.env.Broker)
	// Memory and store agree after every step, failed ones included.
	if cerr := r.env.Broker.Check(); cerr != nil {
		r.t.Errorf("%s: %v", line, cerr)
	}
	if err != nil {
		return "error: " + core.CodeOf(err).String() + ": " + err.Error()
	}
	if out == "" {
		return "ok"
	}
	return out
}

func (r *scriptRunner) path(a *args) string {
	if len(a.pos) == 0 {
		a.err = fmt.Errorf("missing entity path")
		return ""
	}
	return a.pos[0]
}

func (r *scriptRunner) exec(cmd string, a *args) (string, error) {
	b := r.env.Broker
	ctx := r.t.Context()
	switch cmd {
	case "create", "update":
		e := r.entity(a)
		var err error
		if cmd == "create" {
			_, err = b.CreateEntity(ctx, e)
		} else {
			_, err = b.UpdateEntity(ctx, e)
		}
		return "", err
	case "get":
		e, err := b.GetEntity(r.path(a))
		if err != nil {
			return "", err
		}
		return describe(e), nil
	case "list":
		topic := ""
		if len(a.pos) > 1 {
			topic = a.pos[1]
		}
		es, err := b.ListEntities(kindOf(a.pos[0]), topic)
		var paths []string
		for _, e := range es {
			paths = append(paths, e.Path())
		}
		if len(paths) == 0 {
			return "(none)", err
		}
		return strings.Join(paths, "\n"), err
	case "delete":
		return "", b.DeleteEntity(ctx, r.path(a))
	case "send":
		return r.send(a)
	case "receive":
		opts := core.ReceiveOptions{Max: a.int("max", 1), Mode: mode(a)}
		if s := a.str("session"); s != "" {
			opts.Session = r.sessions[s]
		}
		msgs, err := b.Receive(coretest.Now(r.t), r.path(a), opts)
		return r.messages(msgs), err
	case "receive-deferred":
		msgs, err := b.ReceiveDeferred(ctx, r.path(a), mode(a), a.seqs("seqs"))
		return r.messages(msgs), err
	case "peek":
		msgs, err := b.Peek(ctx, r.path(a), core.PeekOptions{From: int64(a.int("from", 0)), Max: a.int("max", 100), SessionID: a.str("sid")})
		return r.messages(msgs), err
	case "settle":
		return "", b.Settle(ctx, r.path(a), r.byName[a.str("lock")], outcome(a))
	case "renew":
		until, err := b.RenewLock(ctx, r.path(a), r.byName[a.str("lock")])
		return "until=" + rel(until), err
	case "cancel":
		return "", b.CancelScheduled(ctx, r.path(a), a.seqs("seqs"))
	case "counts":
		c, err := b.Counts(r.path(a))
		return fmt.Sprintf("active=%d dlq=%d scheduled=%d deferred=%d total=%d", c.Active, c.DeadLetter, c.Scheduled, c.Deferred, c.Total), err
	case "advance":
		d, err := time.ParseDuration(a.pos[0])
		if err != nil {
			return "", err
		}
		r.env.Clock.Advance(d)
		return "now=" + rel(r.env.Clock.Now()), nil
	case "restart":
		r.env.Restart(r.t)
		return "", nil
	case "accept":
		return r.accept(a)
	case "renew-session":
		until, err := b.RenewSessionLock(ctx, r.path(a), r.sessions[a.str("session")])
		return "until=" + rel(until), err
	case "close-session":
		return "", b.CloseSession(r.path(a), r.sessions[a.str("session")])
	case "session-state":
		return r.sessionState(a)
	case "list-sessions":
		var since time.Time
		if a.has("since") {
			since = coretest.Epoch.Add(a.dur("since"))
		}
		ids, err := b.ListSessions(ctx, r.path(a), since)
		if len(ids) == 0 {
			return "(none)", err
		}
		return strings.Join(ids, " "), err
	case "add-rule":
		return "", b.AddRule(ctx, r.path(a), rule(a))
	case "remove-rule":
		return "", b.RemoveRule(ctx, r.path(a), a.str("name"))
	case "rules":
		rules, err := b.ListRules(r.path(a))
		var lines []string
		for _, x := range rules {
			lines = append(lines, formatRule(x))
		}
		return strings.Join(lines, "\n"), err
	}
	a.err = fmt.Errorf("unknown command %q", cmd)
	return "", nil
}

func kindOf(s string) core.EntityKind {
	switch s {
	case "queue":
		return core.KindQueue
	case "topic":
		return core.KindTopic
	case "sub":
		return core.KindSubscription
	}
	return 0
}

func mode(a *args) core.ReceiveMode {
	if a.str("mode") == "delete" {
		return core.ReceiveAndDelete
	}
	return core.PeekLock
}

func (r *scriptRunner) entity(a *args) core.Entity {
	e := core.Entity{Kind: kindOf(a.pos[0])}
	if len(a.pos) < 2 {
		a.err = fmt.Errorf("create/update: want kind and path")
		return e
	}
	p := a.pos[1]
	if e.Kind == core.KindSubscription {
		e.Topic, e.Name, _ = strings.Cut(p, "/")
	} else {
		e.Name = p
	}
	e.LockDuration = a.dur("lock")
	e.MaxDeliveryCount = int32(a.int("maxdelivery", 0))
	e.DefaultMessageTimeToLive = a.dur("ttl")
	e.DeadLetteringOnMessageExpiration = a.has("dlq-on-expiry")
	e.DeadLetteringOnFilterEvaluationExceptions = a.has("dlq-on-filter-error")
	e.RequiresSession = a.has("session")
	if a.has("dedup") {
		e.RequiresDuplicateDetection = true
		e.DuplicateDetectionHistoryTimeWindow = a.dur("dedup")
	}
	e.ForwardTo = a.str("forward")
	e.ForwardDeadLetteredMessagesTo = a.str("forward-dlq")
	e.AutoDeleteOnIdle = a.dur("autodelete")
	e.MaxMessageSizeInKilobytes = int64(a.int("maxsize", 0))
	e.Status = core.EntityStatus(a.str("status"))
	if a.has("sql") || a.has("corr-subject") || a.has("false") {
		e.Rules = []core.Rule{rule(a)}
	}
	return e
}

func describe(e *core.Entity) string {
	s := fmt.Sprintf("%s %s status=%s ttl=%s", e.Kind, e.Path(), e.Status, shortDur(e.DefaultMessageTimeToLive))
	if e.Kind != core.KindTopic {
		s += fmt.Sprintf(" lock=%s maxdelivery=%d", e.LockDuration, e.MaxDeliveryCount)
	}
	flags := []struct {
		on   bool
		name string
	}{
		{e.DeadLetteringOnMessageExpiration, "dlq-on-expiry"},
		{e.DeadLetteringOnFilterEvaluationExceptions, "dlq-on-filter-error"},
		{e.RequiresSession, "session"},
		{e.RequiresDuplicateDetection, "dedup=" + e.DuplicateDetectionHistoryTimeWindow.String()},
		{e.ForwardTo != "", "forward=" + e.ForwardTo},
		{e.ForwardDeadLetteredMessagesTo != "", "forward-dlq=" + e.ForwardDeadLetteredMessagesTo},
		{e.AutoDeleteOnIdle != core.DefaultAutoDeleteOnIdle, "autodelete=" + e.AutoDeleteOnIdle.String()},
	}
	for _, f := range flags {
		if f.on {
			s += " " + f.name
		}
	}
	for _, x := range e.Rules {
		s += "\n  rule " + formatRule(x)
	}
	return s
}

func shortDur(d time.Duration) string {
	if d == core.MaxTimeToLive {
		return "max"
	}
	return d.String()
}

func (r *scriptRunner) send(a *args) (string, error) {
	bodies := strings.Split(a.str("body"), ",")
	if n := a.int("bodysize", 0); n > 0 {
		bodies = []string{strings.Repeat("x", n)} // a body too long to write out
	}
	msgs := make([]*core.Message, len(bodies))
	for i, body := range bodies {
		m := coretest.Text(body)
		if id := a.str("id"); id != "" {
			ids := strings.Split(id, ",")
			m.MessageID = ids[min(i, len(ids)-1)]
		}
		m.SessionID = a.str("sid")
		m.Subject = a.str("subject")
		m.To = a.str("to")
		if c := a.str("corr"); c != "" {
			m.CorrelationID = c
		}
		m.TimeToLive = a.dur("ttl")
		if a.has("scheduled") {
			m.ScheduledEnqueueTime = r.env.Clock.Now().Add(a.dur("scheduled"))
		}
		m.ApplicationProperties = a.props("props")
		msgs[i] = m
	}
	seqs, err := r.env.Broker.Send(r.t.Context(), r.path(a), msgs...)
	if err != nil {
		return "", err
	}
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = strconv.FormatInt(s, 10)
	}
	return "seq=" + strings.Join(parts, ","), nil
}

func outcome(a *args) core.Outcome {
	o := core.Outcome{Properties: a.props("props"), DeadLetterReason: a.str("reason"), DeadLetterDescription: a.str("desc")}
	kinds := map[string]core.OutcomeKind{"complete": core.Complete, "abandon": core.Abandon, "defer": core.Defer, "deadletter": core.DeadLetter, "release": core.Release}
	for _, p := range a.pos {
		if k, ok := kinds[p]; ok {
			o.Kind = k
		}
	}
	if o.Kind == 0 {
		a.err = fmt.Errorf("settle needs an outcome")
	}
	return o
}

func (r *scriptRunner) lockName(tok core.LockToken) string {
	if tok == (core.LockToken{}) {
		return ""
	}
	n, ok := r.locks[tok]
	if !ok {
		n = "#" + strconv.Itoa(len(r.locks)+1)
		r.locks[tok] = n
		r.byName[n] = tok
	}
	return n
}

// messages prints one line per message.
func (r *scriptRunner) messages(msgs []*core.Message) string {
	if len(msgs) == 0 {
		return "(none)"
	}
	var lines []string
	for _, m := range msgs {
		s := fmt.Sprintf("seq=%d body=%s dc=%d", m.SequenceNumber, m.Body, m.DeliveryCount)
		if n := r.lockName(m.LockToken); n != "" {
			s += fmt.Sprintf(" lock=%s until=%s", n, rel(m.LockedUntil))
		}
		if m.State != core.StateActive {
			s += " state=" + m.State.String()
		}
		if m.SessionID != "" {
			s += " sid=" + m.SessionID
		}
		if id := m.MessageIDString(); generatedID.MatchString(id) {
			s += " id=<generated>"
		} else if id != "" {
			s += " id=" + id
		}
		if m.Subject != "" {
			s += " subject=" + m.Subject
		}
		if !m.ExpiresAt.IsZero() {
			s += " expires=" + rel(m.ExpiresAt)
		}
		if m.State == core.StateScheduled {
			s += " scheduled=" + rel(m.ScheduledEnqueueTime)
		}
		if m.DeadLetterSource != "" {
			s += " dlsource=" + m.DeadLetterSource
		}
		keys := make([]string, 0, len(m.ApplicationProperties))
		for k := range m.ApplicationProperties {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s += fmt.Sprintf(" %s=%s", k, formatTyped(m.ApplicationProperties[k]))
		}
		lines = append(lines, s)
	}
	return strings.Join(lines, "\n")
}

func (r *scriptRunner) accept(a *args) (string, error) {
	ctx := coretest.Now(r.t)
	sl, err := r.env.Broker.AcceptSession(ctx, r.path(a), a.str("session"))
	if err != nil {
		return "", err
	}
	name := "$" + strconv.Itoa(len(r.sessions)+1)
	r.sessions[name] = sl
	return fmt.Sprintf("%s session=%s until=%s", name, sl.SessionID, rel(sl.LockedUntil)), nil
}

func (r *scriptRunner) sessionState(a *args) (string, error) {
	b, ctx, p := r.env.Broker, r.t.Context(), r.path(a)
	sl := r.sessions[a.str("session")]
	switch {
	case a.has("set"):
		return "", b.SetSessionState(ctx, p, sl, []byte(a.str("set")))
	case a.has("clear"):
		return "", b.SetSessionState(ctx, p, sl, nil)
	}
	st, err := b.GetSessionState(ctx, p, sl)
	if st == nil {
		return "state=(nil)", err
	}
	return "state=" + string(st), err
}

func rule(a *args) core.Rule {
	x := core.Rule{Name: a.str("name"), Action: a.str("action")}
	switch {
	case a.has("sql"):
		x.Filter = core.Filter{Kind: core.FilterSQL, SQL: a.str("sql")}
	case a.has("corr-subject") || a.has("corr-props") || a.has("corr-id"):
		x.Filter = core.Filter{Kind: core.FilterCorrelation, Correlation: &core.CorrelationFilter{
			Subject: a.str("corr-subject"), CorrelationID: a.str("corr-id"), Properties: a.props("corr-props"),
		}}
	case a.has("false"):
		x.Filter = core.Filter{Kind: core.FilterFalse}
	default:
		x.Filter = core.Filter{Kind: core.FilterTrue}
	}
	return x
}

func formatRule(x core.Rule) string {
	s := x.Name
	switch x.Filter.Kind {
	case core.FilterTrue:
		s += " true"
	case core.FilterFalse:
		s += " false"
	case core.FilterSQL:
		s += " sql=" + strconv.Quote(x.Filter.SQL)
	case core.FilterCorrelation:
		c := x.Filter.Correlation
		s += fmt.Sprintf(" correlation{subject=%q id=%q props=%v}", c.Subject, c.CorrelationID, c.Properties)
	}
	if x.Action != "" {
		s += " action=" + strconv.Quote(x.Action)
	}
	return s
}

// generatedID matches the ids the broker gives messages sent without one.
var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)
