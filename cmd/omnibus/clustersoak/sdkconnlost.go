package clustersoak

import (
	"regexp"
	"strings"
	"sync"
)

// Completions whose connection died under them.
//
// A completion the broker never answered is one thing; one that never
// reached it is another. When a node is deposed the balancer resets its
// client connections (balancer.setUp, as a health check would), and the
// Go SDK cannot settle a message received on such a connection anywhere:
// go-amqp settles on the link the message came by (Receiver.AcceptMessage
// uses msg.rcv, whatever receiver it is called on), and azservicebus falls
// back to the $management link only after an *amqp.LinkError
// (messageSettler.shouldSettleOnMgmtLink, v1.11.0), while a dead
// connection gives a network error ("write tcp …: broken pipe"). So the
// SDK retries the same dead link with backoff (4 s, 8 s, 16 s by default)
// until the operation's 20 s run out: the broker never hears of it. The
// SDK logs each such retry with its link's name ("[c:1, l:1, r:name:agX4da]
// (settle) Retry attempt 0 returned retryable error: write tcp …"); a
// completion that timed out on a link so reported is counted apart from
// those left without an answer by the broker (report.go).

// settleConnLine matches the SDK's report of a settlement that failed
// because its link's connection is gone (a network error, not an AMQP
// condition or a management reply).
var settleConnLine = regexp.MustCompile(`^\[[^\]]*r:name:([^\]]+)\] \(settle\) Retry attempt \d+ returned retryable error: (?:write tcp|read tcp|EOF|amqp: connection closed|.*connection reset)`)

// sdkConnLost records the receive links whose settlements the SDK
// retried on a dead connection, by the first six characters of the
// link's name (as the SDK's log gives them).
type sdkConnLost struct {
	mu    sync.Mutex // guards links
	links map[string]bool
}

// note records what one SDK log line reports.
func (l *sdkConnLost) note(line string) {
	m := settleConnLine.FindStringSubmatch(line)
	if m == nil {
		return
	}
	l.mu.Lock()
	if l.links == nil {
		l.links = map[string]bool{}
	}
	l.links[m[1]] = true
	l.mu.Unlock()
}

// lost reports whether the SDK retried a settlement on link name's dead
// connection (false for a nil l).
func (l *sdkConnLost) lost(name string) bool {
	if l == nil {
		return false
	}
	if len(name) > 6 {
		name = name[:6]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.links[name]
}

// listenSDK has the SDK's log read for both what its releasers gave back
// (sdkrelease.go) and the settlements it retried on dead connections,
// until stop is called (sdklog.go routes the process's one SDK log to
// every run listening). The releasers' lines and the receives that
// failed go to tr as well (nil: nowhere), where a session swap can be
// read back against them.
func listenSDK(tr *trace) (r *sdkReleases, lost *sdkConnLost, stop func()) {
	r, lost = &sdkReleases{byLink: map[string]int64{}}, &sdkConnLost{}
	stop = readSDKLog(func(msg string) {
		r.note(msg)
		lost.note(msg)
		if strings.Contains(msg, "Message releaser") || strings.Contains(msg, "Failure when receiving") {
			tr.line("sdk %s", msg)
		}
	})
	return r, lost, stop
}
