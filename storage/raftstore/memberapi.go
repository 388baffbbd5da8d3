package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// MemberChange is a membership change asked over the peer transport
// (`omnibus cluster add` and `remove`).
type MemberChange struct {
	// Op is "add" or "remove".
	Op   string `json:"op"`
	ID   uint64 `json:"id"`
	Addr string `json:"addr,omitempty"` // the new member's peer address (add)
	// Group is the Raft group to change (groups.go); 0, the meta group,
	// is the one `omnibus cluster add` and `remove` change.
	Group uint64 `json:"group,omitempty"`
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
