package raftstore

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"

	"go.uber.org/zap/zaptest"
)

// A leader deposed in the middle of sending a snapshot (frozen, cut off)
// leaves the receiver reading a stream that goes quiet. Its successor's
// snapshot takes the group over at once, rather than being refused
// until the stalled stream times out: the new leader may need this node
// for its quorum (found by make cluster-test with a backlog: a frozen
// leader's half-sent snapshot held a failover to 7 s). The same leader
// sending again while its first send is under way is still refused.
func TestSnapshotFromANewLeaderTakesOverAStalledOne(t *testing.T) {
	h := newCountingHandler(0)
	h.scratch = t.TempDir()
	h.lead.Store(1)
	// Mutual TLS and HTTP/2, as between members.
	tr := startTransportWith(t, 3, h, peerSecurity{creds: testCreds(t, 3)}, zaptest.NewLogger(t))
	url := "https://" + tr.addr() + pathSnapshot + "?group=1"
	// A client per send, each its own connection: the stalled one must
	// not be reused.
	client := func(from uint64) *http.Client { return peerSecurity{creds: testCreds(t, from)}.newSnapshotClient(3) }
	first, again, next := client(1), client(1), client(2)

	// Node 1 sends its snapshot's message, then nothing more.
	stalled, stall := io.Pipe()
	defer stall.Close()
	firstDone := make(chan int, 1)
	go func() {
		resp, err := snapshotPost(first, url, 1, stalled)
		if err != nil {
			firstDone <- 0
			return
		}
		firstDone <- resp.StatusCode
	}()
	if _, err := stall.Write(snapshotBody(t, 1, 3)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node 1's snapshot to be under way", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.snapIn[1] != nil
	})

	// Node 1 again, while its first send is under way: refused.
	if resp, err := snapshotPost(again, url, 1, bytes.NewReader(completeSnapshot(t, 1, 3))); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("node 1 sending again while it sends: %v, %v; want 503", status(resp), err)
	}

	// Node 2 now leads: its snapshot is taken, node 1's given up.
	h.lead.Store(2)
	resp, err := snapshotPost(next, url, 2, bytes.NewReader(completeSnapshot(t, 2, 3)))
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("the new leader's snapshot while the deposed one's stalls: %v, %v; want 204", status(resp), err)
	}
	if got := h.snapshots.Load(); got != 1 {
		t.Fatalf("%d snapshots delivered to the node, want 1 (the new leader's)", got)
	}
	if code := <-firstDone; code == http.StatusNoContent {
		t.Fatal("the stalled snapshot was taken")
	}
	if left, _ := os.ReadDir(h.scratch); len(left) != 0 {
		t.Fatalf("scratch left behind by the aborted snapshot: %v", left)
	}
}

// snapshotPost sends a snapshot of group 1 to node 3 as node from, with
// c, and reads the answer.
func snapshotPost(c *http.Client, url string, from uint64, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set(headerFrom, strconv.FormatUint(from, 10))
	req.Header.Set(headerTo, "3")
	resp, err := c.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// completeSnapshot is a snapshot's message followed by an empty
// checkpoint.
func completeSnapshot(t *testing.T, from, to uint64) []byte {
	var files bytes.Buffer
	if err := tar.NewWriter(&files).Close(); err != nil {
		t.Fatal(err)
	}
	return append(snapshotBody(t, from, to), files.Bytes()...)
}

func status(resp *http.Response) string {
	if resp == nil {
		return "no response"
	}
	return resp.Status
}
