package console

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/membudget"
)

// memoryBusyText answers a peek the memory budget has no room for.
const memoryBusyText = "The server is busy: the memory its clients may make it hold (--max-memory) is in use. Retry later."

// retryAfterSeconds is the Retry-After of that answer.
const retryAfterSeconds = "1"

// page is a peek page being filled and written. The bodies it loads are
// taken from the memory budget before they are read (reserve, through
// core.PeekOptions.Reserve) and given back as they are written or
// dropped; the page stops taking messages at maxPeekBytes (past the
// first) or when the budget refuses one.
type page struct {
	mem     *membudget.Budget
	msgs    []*core.Message
	held    int  // bytes taken from the budget and not given back
	scanned int  // messages looked at
	full    bool // reserve refused a message: the page ends before it
	refused bool // and the budget was why
}

// reserve takes a message of n bytes for the page, if it fits.
func (p *page) reserve(n int) bool {
	if p.held > 0 && p.held+n > maxPeekBytes {
		p.full = true
		return false
	}
	if !p.mem.TryAcquire(membudget.ConsolePage, int64(n)) {
		p.full, p.refused = true, true
		return false
	}
	p.held += n
	return true
}

// drop lets go of a loaded message the page does not show.
func (p *page) drop(m *core.Message) {
	n := min(m.Size(), p.held)
	p.held -= n
	p.mem.Release(int64(n))
}

// release gives back what the page still holds.
func (p *page) release() {
	p.mem.Release(int64(p.held))
	p.held = 0
}

// write streams the page as JSON — {"messages": [...], "next": N,
// "scanned": N} — each body base64-encoded straight from its message,
// which is let go of once written: the answer is never built whole in
// memory.
func (p *page) write(w http.ResponseWriter, next int64) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"messages":[`)
	for i, m := range p.msgs {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := writeMessage(bw, m); err != nil {
			return // the client went away
		}
		p.msgs[i] = nil
		p.drop(m)
	}
	bw.WriteString(`],"next":` + strconv.FormatInt(next, 10) + `,"scanned":` + strconv.Itoa(p.scanned) + "}\n")
	bw.Flush()
}

// writeMessage writes one message of a page: its properties (toJSON),
// then "body" in base64.
func writeMessage(bw *bufio.Writer, m *core.Message) error {
	head, err := json.Marshal(toJSON(m))
	if err != nil {
		return err
	}
	bw.Write(head[:len(head)-1]) // without the closing brace
	bw.WriteString(`,"body":"`)
	enc := base64.NewEncoder(base64.StdEncoding, bw)
	enc.Write(m.Body)
	enc.Close()
	_, err = bw.WriteString(`"}`)
	return err
}
