package raftstore

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// Bad input on the peer port of a running node with mutual TLS: each
// attempt is refused, the log says why, and the node's state is what it
// was (same term, log, applied index, members; no snapshot taken in, no
// certificate signed).

// guardedNode is a one-node cluster that leads, with its logs observed.
type guardedNode struct {
	c    *testCluster
	n    *Node
	addr string
	logs *observer.ObservedLogs
}

func startGuardedNode(t *testing.T) *guardedNode {
	core, logs := observer.New(zapcore.InfoLevel)
	c := newTestCluster(t, 1, false, func(cfg *Config) {
		cfg.Logger = zap.New(zapcore.NewTee(cfg.Logger.Core(), core))
	})
	s, _ := c.session()
	mustPut(t, s, "k", "v")
	s.Close()
	return &guardedNode{c: c, n: c.nodes[1], addr: c.peers[1], logs: logs}
}

// nodeState is what a refused request must not change.
type nodeState struct {
	Term, Commit, Applied, LastIndex uint64
	Installed                        int64
	Members                          string
	Scratch                          []string
}

func (g *guardedNode) state(t *testing.T) nodeState {
	t.Helper()
	st := g.n.Status()
	var members []string
	for _, m := range st.Members {
		members = append(members, fmt.Sprintf("%d=%s voter=%v", m.ID, m.Addr, m.Voter))
	}
	var scratch []string
	entries, err := os.ReadDir(g.c.dirs[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), snapScratchPrefix) {
			scratch = append(scratch, e.Name())
		}
	}
	return nodeState{Term: st.Term, Commit: st.Commit, Applied: st.Applied, LastIndex: st.LastIndex,
		Installed: st.SnapshotsInstalled, Members: strings.Join(members, ","), Scratch: scratch}
}

// refused runs attempt and checks that a warning or info line matching
// msg and reason was logged and the node's state did not change.
func (g *guardedNode) refused(t *testing.T, msg, reason string, attempt func()) {
	t.Helper()
	before := g.state(t)
	g.logs.TakeAll()
	attempt()
	waitFor(t, "the refusal to be logged", func() bool {
		for _, e := range g.logs.All() {
			if strings.Contains(e.Message, msg) && strings.Contains(fmt.Sprint(e.ContextMap()), reason) {
				return true
			}
		}
		return false
	})
	if after := g.state(t); !stateEqual(before, after) {
		t.Fatalf("a refused request changed the node: before %+v, after %+v", before, after)
	}
}

func stateEqual(a, b nodeState) bool {
	return a.Term == b.Term && a.Commit == b.Commit && a.Applied == b.Applied && a.LastIndex == b.LastIndex &&
		a.Installed == b.Installed && a.Members == b.Members && slices.Equal(a.Scratch, b.Scratch)
}

// httpsClient presents certs (none when nil) and checks nothing of the
// server: what a stranger's client does.
func httpsClient(certs []tls.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
}

func post(t *testing.T, c *http.Client, url string, headers map[string]string, body []byte) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func TestPeerWithoutCertificateIsRefused(t *testing.T) {
	g := startGuardedNode(t)
	stranger := httpsClient(nil)
	for _, path := range []string{pathMembers, pathSnapshot, pathTokens, pathStream} {
		g.refused(t, "refused a peer request", "no client certificate", func() {
			resp, err := post(t, stranger, "https://"+g.addr+path, map[string]string{headerFrom: "2", headerTo: "1",
				"Authorization": testAdminKey}, []byte(`{"op":"remove","id":1}`))
			if err != nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("POST %s without a certificate: %v, %v; want 403", path, resp, err)
			}
		})
	}
	resp, err := stranger.Get("https://" + g.addr + pathStatus)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET status without a certificate: %v, %v; want 403", resp, err)
	}
	resp.Body.Close()
	// Plain HTTP to a TLS port gets nothing either.
	if resp, err := http.Get("http://" + g.addr + pathStatus); err == nil && resp.StatusCode == http.StatusOK {
		t.Fatalf("plain HTTP status: %s", resp.Status)
	}
}

func TestPeerWithAnotherClustersCertificateIsRefused(t *testing.T) {
	g := startGuardedNode(t)
	other, err := peertls.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	impostor := newTestCreds(t, other, 2)
	g.refused(t, "refused a peer connection: its certificate", "not issued by this cluster's CA", func() {
		_, err := post(t, httpsClient([]tls.Certificate{impostor.Cert}), "https://"+g.addr+pathMembers,
			map[string]string{"Authorization": testAdminKey}, []byte(`{"op":"remove","id":1}`))
		if err == nil {
			t.Fatal("a membership change with another cluster's certificate got an answer")
		}
	})
	// Nor does a node of this cluster accept that peer as node 2 when it
	// dials it (its lane logs why, once).
	t2 := startTransportWith(t, 2, newCountingHandler(0), peerSecurity{creds: impostor}, nil)
	g.refused(t, "peer refused a stream", "not issued by this cluster's CA", func() {
		g.n.tr.setPeer(2, t2.addr())
		g.n.tr.send(2, []pb.Message{heartbeat(1, 2)})
	})
	g.n.tr.removePeer(2)
}

func TestPeerWithAnotherNodesCertificateIsRefused(t *testing.T) {
	g := startGuardedNode(t)
	creds2 := newTestCreds(t, g.c.ca, 2)
	// A stream from "node 3" with node 2's certificate.
	g.refused(t, "refused a peer request", "names node 2, its request node 3", func() {
		_, _, resp := requestStream(t, g.addr, creds2, 3, 1, laneCtl)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a stream claiming node 3 with node 2's certificate: %s, want 403", resp.Status)
		}
	})
	// A snapshot likewise.
	g.refused(t, "refused a peer request", "names node 2, its request node 3", func() {
		resp, err := post(t, httpsClient([]tls.Certificate{creds2.Cert}), "https://"+g.addr+pathSnapshot,
			map[string]string{headerFrom: "3", headerTo: "1"}, snapshotBody(t, 3, 1))
		if err != nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a snapshot claiming node 3 with node 2's certificate: %v, %v; want 403", resp, err)
		}
	})
	// Dialling node 2 and finding node 3's certificate there: refused by
	// the dialler.
	t3 := startTransportWith(t, 3, newCountingHandler(0), peerSecurity{creds: newTestCreds(t, g.c.ca, 3)}, nil)
	g.refused(t, "peer refused a stream", "presented node 3's certificate, expected node 2's", func() {
		g.n.tr.setPeer(2, t3.addr())
		g.n.tr.send(2, []pb.Message{heartbeat(1, 2)})
	})
	g.n.tr.removePeer(2)
	// A member's certificate without the Manage key changes nothing.
	g.refused(t, "refused a peer request", "the Manage key is needed", func() {
		err := NewClient(creds2, func() string { return "wrong" }).ChangeMembers(t.Context(), g.addr, MemberChange{Op: "remove", ID: 1})
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("a membership change without the key: %v, want 401", err)
		}
	})
}

func TestPeerFrameOverTheCapIsRefused(t *testing.T) {
	g := startGuardedNode(t)
	g.refused(t, "peer sent a frame over the cap", "", func() {
		conn, br, resp := requestStream(t, g.addr, newTestCreds(t, g.c.ca, 2), 2, 1, laneApp)
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("stream: %s", resp.Status)
		}
		if _, err := conn.Write(binary.BigEndian.AppendUint32(nil, maxFrameBytes+1)); err != nil {
			t.Fatal(err)
		}
		awaitClosed(t, conn, br)
	})
}

func TestSnapshotFromANonLeaderIsRefused(t *testing.T) {
	g := startGuardedNode(t) // node 1 leads itself
	creds2 := newTestCreds(t, g.c.ca, 2)
	g.refused(t, "refused a peer request", "node 2 is not the leader this node follows", func() {
		resp, err := post(t, httpsClient([]tls.Certificate{creds2.Cert}), "https://"+g.addr+pathSnapshot,
			map[string]string{headerFrom: "2", headerTo: "1"}, snapshotBody(t, 2, 1))
		if err != nil || resp.StatusCode != http.StatusConflict {
			t.Fatalf("a snapshot from node 2, which does not lead: %v, %v; want 409", resp, err)
		}
	})
}

func TestJoinTokenExpiredOrReusedIsRefused(t *testing.T) {
	g := startGuardedNode(t)
	cl := g.c.client()
	tok, err := cl.JoinToken(t.Context(), g.addr, 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Enroll(t.Context(), tok, 5); err != nil {
		t.Fatalf("first use of a join token: %v", err)
	}
	signed := len(g.logs.FilterMessage("admitted a node: signed its certificate").All())
	g.refused(t, "refused a peer request", "already used", func() {
		if _, err := Enroll(t.Context(), tok, 5); err == nil || !strings.Contains(err.Error(), "already used") {
			t.Fatalf("second use of a join token: %v, want already used", err)
		}
	})
	tok, err = cl.JoinToken(t.Context(), g.addr, 6, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A joiner that edits the node id in its token.
	forged, _ := peertls.ParseToken(tok)
	forged.Node = 7
	g.refused(t, "refused a peer request", "is for node 6, not 7", func() {
		if _, err := Enroll(t.Context(), forged.String(), 7); err == nil {
			t.Fatal("a token for node 6 got node 7 a certificate")
		}
	})
	tr := g.n.host.tr.(*httpTransport)
	tr.now = func() time.Time { return time.Now().Add(2 * time.Minute) } // set before any request reads it
	g.refused(t, "refused a peer request", "expired", func() {
		if _, err := Enroll(t.Context(), tok, 6); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("an expired join token: %v, want expired", err)
		}
	})
	if n := len(g.logs.FilterMessage("admitted a node: signed its certificate").All()); n != 0 || signed != 1 {
		t.Fatalf("certificates signed: %d at the first use, %d for the refused ones; want 1, 0", signed, n)
	}
	// A token of another cluster names another CA: the joiner does not
	// even send it to this one.
	other := startGuardedNode(t)
	otherTok, err := other.c.client().JoinToken(t.Context(), other.addr, 8, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := peertls.ParseToken(otherTok)
	parsed.Addr = g.addr
	if _, err := Enroll(t.Context(), parsed.String(), 8); err == nil || !strings.Contains(err.Error(), "not of the cluster") {
		t.Fatalf("a token pointed at another cluster's member: %v", err)
	}
}

// snapshotBody is the start of a snapshot POST: the length-prefixed
// MsgSnap (the files would follow).
func snapshotBody(t *testing.T, from, to uint64) []byte {
	m := pb.Message{Type: pb.MsgSnap, From: from, To: to, Term: 99,
		Snapshot: &pb.Snapshot{Metadata: pb.SnapshotMetadata{Index: 10, Term: 99}}}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(data))), data...)
}

// A stranger who knocks a thousand times is logged ten times a second,
// not a thousand: handshakes with no certificate or another CA's, and
// requests without one, share one limit.
func TestPeerRefusalsAreLoggedWithinALimit(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	t2 := startTestTransport(t, 2, newCountingHandler(0), zap.New(core))
	other, err := peertls.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	impostor := httpsClient([]tls.Certificate{newTestCreds(t, other, 1).Cert})
	stranger := httpsClient(nil)
	start := time.Now()
	for range 100 {
		if resp, err := stranger.Get("https://" + t2.addr() + pathStatus); err == nil {
			resp.Body.Close()
		}
		if resp, err := impostor.Get("https://" + t2.addr() + pathStatus); err == nil {
			resp.Body.Close()
		}
		stranger.CloseIdleConnections()
	}
	seconds := int(time.Since(start)/time.Second) + 1
	if n := logs.Len(); n == 0 || n > seconds*(refusalsPerSecond+1) {
		t.Fatalf("%d warnings for 200 refusals in %d s; want some, at most %d a second", n, seconds, refusalsPerSecond+1)
	}
}
