package clustersoak

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// What the SDK gives back unseen.
//
// Between two ReceiveMessages calls the Go SDK's receiver keeps the credit
// it has open and releases whatever arrives for it (its "releaser",
// azservicebus receiver.go newReleaserFunc): the application never sees
// those deliveries. A released message goes back to the head of its
// session, as Service Bus redelivers it, but behind the messages already
// transferred to the link, which the SDK keeps for the next call: while it
// releases 5, the broker may have sent 6, and the application first sees
// 6, then 5. Service Bus does the same (a message given back comes again
// after the ones a receiver already holds; the .NET SDK drains a session
// link's credit to avoid it, the Go SDK does not; a broker trace of it is
// in storage/raftstore/README.md). So the session check must not count
// such a swap: the SDK reports in its log how many messages each releaser
// gave back, and the session receiver hands those to the ledger
// (Ledger.ReleasedUnseen), which excuses as many swaps in the session,
// each of a message sent and not yet seen when the release was reported.
//
// A releaser can also take a message and fail to give it back: when its
// release is not confirmed (the broker detaches a session receiver's link
// when the release cannot be applied, as at a failover), the SDK does not
// count it, logs only that the releaser stopped on a link failure, and
// the deliveries already on the link still reach the application, the
// later ones first. The message comes again once the lock it holds ends.
// So each such stop counts as one more message possibly given back unseen
// (at most one: the releaser stops at its first failure).

// sdkReleases counts, per receive link, the messages the SDK's releaser
// gave back, from the SDK's log. Its log names a link by the first six
// characters of its name ("[c:1, l:1, r:name:Buib4g] Message releaser
// pausing. Released 1 messages").
type sdkReleases struct {
	mu     sync.Mutex       // guards byLink
	byLink map[string]int64 // by link name prefix: messages released, or possibly (see above)
}

// releaserLine matches the SDK's report of a releaser that stopped, at
// the next receive or close, or because its link failed.
var releaserLine = regexp.MustCompile(`^\[[^\]]*r:name:([^\]]+)\] Message releaser (pausing|stopping because of link failure)\. Released (\d+) messages`)

// note counts what one SDK log line reports released: on a link failure,
// one more that the releaser may have taken and failed to give back.
func (r *sdkReleases) note(line string) {
	m := releaserLine.FindStringSubmatch(line)
	if m == nil {
		return
	}
	n, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil {
		return
	}
	if m[2] != "pausing" {
		n++
	}
	r.mu.Lock()
	r.byLink[m[1]] += n
	r.mu.Unlock()
}

// released is how many messages the link named name has given back so
// far, or may have (0 for a nil r).
func (r *sdkReleases) released(name string) int64 {
	if r == nil {
		return 0
	}
	if len(name) > 6 {
		name = name[:6]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byLink[name]
}

// linkNameOf is the name of the link m arrived on. The SDK keeps it in
// an unexported field (ReceivedMessage.linkName, for its management
// calls); TestLinkNameOf fails when an SDK update moves it.
func linkNameOf(m *azservicebus.ReceivedMessage) string {
	f := reflect.ValueOf(m).Elem().FieldByName("linkName")
	if f.Kind() != reflect.String {
		return ""
	}
	return f.String()
}

// linkNames are the names of the links msgs arrived on.
func linkNames(msgs []*azservicebus.ReceivedMessage) []string {
	names := make([]string, 0, 1)
	for _, m := range msgs {
		if name := linkNameOf(m); name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// holdReleases accounts for one session hold the messages its links'
// releasers gave back: each call hands the ledger those released since
// the last, on the links its deliveries came by.
type holdReleases struct {
	links map[string]int64 // link name → released already accounted
}

// account notes that the hold received on the links named names and
// returns how many more messages its links have released since the last
// call (releases of a link before its first delivery came included).
func (h *holdReleases) account(r *sdkReleases, names ...string) int64 {
	if h.links == nil {
		h.links = map[string]int64{}
	}
	for _, name := range names {
		if _, ok := h.links[name]; !ok {
			h.links[name] = 0
		}
	}
	var n int64
	for name, done := range h.links {
		now := r.released(name)
		n += now - done
		h.links[name] = now
	}
	return n
}
