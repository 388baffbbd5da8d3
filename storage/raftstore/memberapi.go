package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// MemberChange is a membership change asked over the peer transport
// (`omnibus cluster add` and `remove`).
type MemberChange struct {
	// Op is "add" or "remove".
	Op   string `json:"op"`
	ID   uint64 `json:"id"`
	Addr string `json:"addr,omitempty"` // the new member's peer address (add)
}

// memberAnswer is the peer API's answer to a MemberChange.
type memberAnswer struct {
	Error  string `json:"error,omitempty"`
	Leader uint64 `json:"leader,omitempty"` // when the node asked does not lead
}

// maxMemberWait bounds how long the peer API waits for a change.
const maxMemberWait = 5 * time.Minute

// changeMembers implements handler.
func (n *Node) changeMembers(ctx context.Context, c MemberChange) error {
	switch c.Op {
	case "add":
		return n.AddMember(ctx, c.ID, c.Addr)
	case "remove":
		return n.RemoveMember(ctx, c.ID)
	}
	return fmt.Errorf("raftstore: membership change %q: want add or remove", c.Op)
}

// serveMembers runs one membership change and answers when it is applied.
func (t *httpTransport) serveMembers(w http.ResponseWriter, r *http.Request) {
	var c MemberChange
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&c); err != nil {
		writeMemberAnswer(w, http.StatusBadRequest, memberAnswer{Error: "bad request: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), maxMemberWait)
	defer cancel()
	err := t.h.changeMembers(ctx, c)
	var nl *NotLeaderError
	switch {
	case err == nil:
		writeMemberAnswer(w, http.StatusOK, memberAnswer{})
	case errors.As(err, &nl):
		writeMemberAnswer(w, http.StatusMisdirectedRequest, memberAnswer{Error: err.Error(), Leader: nl.Leader})
	case errors.Is(err, errChangePending):
		writeMemberAnswer(w, http.StatusConflict, memberAnswer{Error: err.Error()})
	default:
		writeMemberAnswer(w, http.StatusUnprocessableEntity, memberAnswer{Error: err.Error()})
	}
}

func writeMemberAnswer(w http.ResponseWriter, code int, a memberAnswer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(a)
}

// ChangeMembers asks the group to make change c, through its leader: it
// asks the member whose peer transport listens at addr for the leader,
// then the leader, and returns once the change is applied there (an
// added member has caught up and votes) or ctx ends.
func ChangeMembers(ctx context.Context, addr string, c MemberChange) error {
	st, err := FetchStatus(ctx, addr)
	if err != nil {
		return err
	}
	leaderAddr := ""
	if st.Leader == st.ID {
		leaderAddr = addr
	}
	for _, m := range st.Members {
		if m.ID == st.Leader && leaderAddr == "" {
			leaderAddr = m.Addr
		}
	}
	if leaderAddr == "" {
		return fmt.Errorf("member %d at %s knows no leader (or not its address)", st.ID, addr)
	}
	body, _ := json.Marshal(c)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+leaderAddr+pathMembers, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var a memberAnswer
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err := json.Unmarshal(raw, &a); err != nil && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", leaderAddr, resp.Status, strings.TrimSpace(string(raw)))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("leader %d at %s: %s", st.Leader, leaderAddr, a.Error)
	}
	return nil
}
