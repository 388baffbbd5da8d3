package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

type peekAnswer struct {
	Messages []struct {
		SequenceNumber int64
		State          string
		Body           []byte
		Properties     []struct{ Name, Type, Value string }
	}
	Next    int64
	Scanned int
}

func seqs(p peekAnswer) []int64 {
	var out []int64
	for _, m := range p.Messages {
		out = append(out, m.SequenceNumber)
	}
	return out
}

// TestPeekStatesAndPaging: each state shows only its messages, pages
// follow on from "next", and nothing peeked is locked or taken.
func TestPeekStatesAndPaging(t *testing.T) {
	e := newEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	for i := range 7 {
		e.MustSend(t, "q", &core.Message{Body: []byte(fmt.Sprint(i)), ApplicationProperties: map[string]any{"n": int64(i), "when": coretest.Epoch}})
	}
	e.MustSend(t, "q", &core.Message{Body: []byte("later"), ScheduledEnqueueTime: coretest.Epoch.Add(time.Hour)})
	got := e.MustReceive(t, "q", core.PeekLock, 2)
	e.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.Defer})
	e.MustSettle(t, "q", got[1].LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "bad"})

	var p peekAnswer
	e.apiCall(t, "GET", "messages?path=q&state=active&max=3", "", &p)
	if fmt.Sprint(seqs(p)) != "[3 4 5]" || p.Next != 6 {
		t.Fatalf("first page of active: %v next %d", seqs(p), p.Next)
	}
	e.apiCall(t, "GET", fmt.Sprintf("messages?path=q&state=active&max=3&from=%d", p.Next), "", &p)
	if fmt.Sprint(seqs(p)) != "[6 7]" || p.Next != 0 {
		t.Fatalf("second page of active: %v next %d", seqs(p), p.Next)
	}
	e.apiCall(t, "GET", "messages?path=q&state=deferred", "", &p)
	if fmt.Sprint(seqs(p)) != "[1]" || p.Messages[0].State != "Deferred" {
		t.Fatalf("deferred: %+v", p)
	}
	e.apiCall(t, "GET", "messages?path=q&state=scheduled", "", &p)
	if fmt.Sprint(seqs(p)) != "[8]" || string(p.Messages[0].Body) != "later" {
		t.Fatalf("scheduled: %+v", p)
	}
	e.apiCall(t, "GET", "messages?path=q&state=deadletter", "", &p)
	if len(p.Messages) != 1 || string(p.Messages[0].Body) != "1" {
		t.Fatalf("dead-lettered: %+v", p)
	}
	props := fmt.Sprint(p.Messages[0].Properties)
	for _, want := range []string{"{DeadLetterReason string bad}", "{n int64 1}", "{when datetime 2026-01-02T03:04:05Z}"} {
		if !strings.Contains(props, want) {
			t.Errorf("dead-lettered message properties %s lack %s", props, want)
		}
	}
	if c := e.MustCounts(t, "q"); c.Active != 5 || c.Deferred != 1 || c.Scheduled != 1 || c.DeadLetter != 1 {
		t.Fatalf("peeking changed counts: %+v", c)
	}
	if status, _ := e.call(t, "GET", "/console/$api/messages?path=q&state=bogus", rootToken(), "", nil); status != 400 {
		t.Fatalf("unknown state: status %d, want 400", status)
	}
	if status, _ := e.call(t, "GET", "/console/$api/messages?path=nope", rootToken(), "", nil); status != 404 {
		t.Fatalf("unknown entity: status %d, want 404", status)
	}
}

// TestResubmitAndPurge: chosen dead letters go back to their queue (the
// others stay, unlocked), then all of them; purge empties the queue.
func TestResubmitAndPurge(t *testing.T) {
	e := newEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	for i := range 5 {
		e.MustSend(t, "q", &core.Message{MessageID: fmt.Sprint("m", i), Body: []byte(fmt.Sprint(i))})
	}
	for _, m := range e.MustReceive(t, "q", core.PeekLock, 5) {
		e.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "r"})
	}
	var r struct {
		Resubmitted int
		NotFound    []int64
		More        bool
	}
	e.apiCall(t, "POST", "resubmit", `{"path":"q","sequences":[2,4,99]}`, &r)
	if r.Resubmitted != 2 || fmt.Sprint(r.NotFound) != "[99]" {
		t.Fatalf("resubmit chosen: %+v", r)
	}
	if c := e.MustCounts(t, "q"); c.Active != 2 || c.DeadLetter != 3 {
		t.Fatalf("after resubmitting two: %+v", c)
	}
	// The others were released: they can be received at once.
	if got := e.MustReceive(t, "q/$DeadLetterQueue", core.PeekLock, 10); len(got) != 3 {
		t.Fatalf("the messages not chosen stay locked: received %d of 3", len(got))
	} else {
		for _, m := range got {
			e.MustSettle(t, "q/$DeadLetterQueue", m.LockToken, core.Outcome{Kind: core.Abandon})
		}
	}
	back := e.MustReceive(t, "q", core.ReceiveAndDelete, 10)
	if len(back) != 2 || back[0].MessageIDString() != "m1" || back[0].ApplicationProperties["DeadLetterReason"] != nil {
		t.Fatalf("resubmitted messages: %+v", back)
	}
	e.apiCall(t, "POST", "resubmit", `{"path":"q","all":true}`, &r)
	if r.Resubmitted != 3 || r.More {
		t.Fatalf("resubmit all: %+v", r)
	}
	var pr struct {
		Deleted int
		More    bool
	}
	e.apiCall(t, "POST", "purge", `{"path":"q"}`, &pr)
	if pr.Deleted != 3 {
		t.Fatalf("purge: %+v", pr)
	}
	if c := e.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("after purge: %+v", c)
	}
	// Purging the dead-letter subqueue.
	e.MustSend(t, "q", &core.Message{Body: []byte("x")})
	m := e.MustReceive(t, "q", core.PeekLock, 1)[0]
	e.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.DeadLetter})
	e.apiCall(t, "POST", "purge", `{"path":"q","deadLetter":true}`, &pr)
	if pr.Deleted != 1 || e.MustCounts(t, "q").Total != 0 {
		t.Fatalf("purge of the dead-letter queue: %+v, counts %+v", pr, e.MustCounts(t, "q"))
	}
}

// TestSettleDeadLetterAndDefer: the API settles a lock taken elsewhere.
func TestSettleDeadLetterAndDefer(t *testing.T) {
	e := newEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	e.MustSend(t, "q", &core.Message{Body: []byte("a")}, &core.Message{Body: []byte("b")})
	got := e.MustReceive(t, "q", core.PeekLock, 2)
	e.apiCall(t, "POST", "settle", fmt.Sprintf(`{"path":"q","lockToken":"%s","outcome":"deadletter","reason":"why","description":"because"}`, got[0].LockToken), nil)
	e.apiCall(t, "POST", "settle", fmt.Sprintf(`{"path":"q","lockToken":"%s","outcome":"defer"}`, got[1].LockToken), nil)
	if c := e.MustCounts(t, "q"); c.DeadLetter != 1 || c.Deferred != 1 || c.Active != 0 {
		t.Fatalf("after dead-letter and defer: %+v", c)
	}
	if status, body := e.call(t, "POST", "/console/$api/settle", rootToken(), fmt.Sprintf(`{"path":"q","lockToken":"%s","outcome":"complete"}`, got[0].LockToken), nil); status != 404 {
		t.Fatalf("settling a settled lock: status %d, want 404 (%s)", status, body)
	}
}

// TestSessionsAndFilterCheck: the sessions list and the filter check.
func TestSessionsAndFilterCheck(t *testing.T) {
	e := newEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	e.MustSend(t, "sq", &core.Message{SessionID: "b", Body: []byte("1")}, &core.Message{SessionID: "a", Body: []byte("2")}, &core.Message{SessionID: "a", Body: []byte("3")})
	sl, err := e.Broker.AcceptSession(t.Context(), "sq", "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Broker.SetSessionState(t.Context(), "sq", sl, []byte("step 2")); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Total int
		Items []struct {
			ID        string
			Messages  int
			StateText string
			Locked    bool
		}
	}
	e.apiCall(t, "GET", "sessions?path=sq", "", &s)
	if s.Total != 2 || len(s.Items) != 2 || s.Items[0].ID != "a" || s.Items[0].Messages != 2 || s.Items[0].Locked ||
		s.Items[1].ID != "b" || !s.Items[1].Locked || s.Items[1].StateText != "step 2" {
		t.Fatalf("sessions: %+v", s)
	}
	e.apiCall(t, "GET", "sessions?path=sq&after=a&top=1", "", &s)
	if len(s.Items) != 1 || s.Items[0].ID != "b" {
		t.Fatalf("second page of sessions: %+v", s)
	}

	var f struct {
		Filter struct {
			OK           bool
			Error        string
			Line, Column int
		}
		Action *struct{ OK bool }
	}
	e.apiCall(t, "POST", "filter", `{"filter":"a = 1\nAND (b = 2","action":"SET x = 1"}`, &f)
	if f.Filter.OK || f.Filter.Line != 2 || f.Filter.Column == 0 || f.Filter.Error == "" || f.Action == nil || !f.Action.OK {
		t.Fatalf("filter check: %+v", f)
	}
	e.apiCall(t, "POST", "filter", `{"filter":"sys.Label LIKE 'a%'"}`, &f)
	if !f.Filter.OK {
		t.Fatalf("a valid filter: %+v", f)
	}
}

// TestBadInput: malformed or impossible calls get a clear 4xx and change
// nothing.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	e.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	e.MustSend(t, "q", &core.Message{Body: []byte("keep")})
	cases := []struct {
		method, path, body string
		status             int
	}{
		{"GET", "entities?kind=bogus", "", 400},
		{"GET", "entities?kind=subscriptions", "", 400},
		{"GET", "entities?kind=queues&top=0", "", 400},
		{"GET", "entities?kind=queues&skip=-1", "", 400},
		{"GET", "entity?path=nope", "", 404},
		{"GET", "messages?path=q&max=1000", "", 400},
		{"GET", "messages?path=q&from=x", "", 400},
		{"GET", "messages", "", 400},
		{"GET", "sessions?path=q", "", 400},
		{"POST", "settle", `{"path":"q","lockToken":"nope","outcome":"complete"}`, 400},
		{"POST", "settle", `{"path":"q","lockToken":"00000000-0000-0000-0000-000000000001","outcome":"explode"}`, 400},
		{"POST", "settle", `{"path":"q","lockToken":"00000000-0000-0000-0000-000000000001","outcome":"complete"}`, 404},
		{"POST", "resubmit", `{"path":"q"}`, 400},
		{"POST", "resubmit", `{"path":"t","all":true}`, 400},
		{"POST", "resubmit", `{"path":"nope","all":true}`, 404},
		{"POST", "purge", `{"path":"t"}`, 400},
		{"POST", "purge", `{"path":"q"`, 400},
		{"POST", "purge", `{"path":"q","extra":1}`, 400},
		{"POST", "purge", `{"path":"q"} {"path":"q"}`, 400},
		{"POST", "purge", `{"path":"q","pad":"` + strings.Repeat("x", 300<<10) + `"}`, 413},
		{"GET", "nothing-here", "", 404},
		{"DELETE", "purge", "", 404},
	}
	for _, c := range cases {
		status, body := e.call(t, c.method, "/console/$api/"+c.path, rootToken(), c.body, nil)
		if status != c.status || !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s: status %d, want %d (%s)", c.method, c.path, status, c.status, body)
		}
	}
	if c := e.MustCounts(t, "q"); c.Active != 1 {
		t.Fatalf("bad calls changed the queue: %+v", c)
	}
}
