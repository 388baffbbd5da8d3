package raftstore

import (
	"archive/tar"
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// A snapshot travels as one POST: a length-prefixed MsgSnap, then a tar
// of the Pebble checkpoint's files.

const maxSnapMsgBytes = 16 << 20

// snapKey names a snapshot being sent: one per peer and group at a time.
type snapKey struct{ group, peer uint64 }

func (t *httpTransport) sendSnapshot(group uint64, m pb.Message, checkpoint func(dir string) error, done func(ok bool)) {
	key := snapKey{group, m.To}
	t.mu.Lock()
	p := t.peers[m.To]
	if t.closed || p == nil || t.snapOut[key] {
		t.mu.Unlock()
		go done(false) // never from the caller's goroutine: it is the loop
		return
	}
	t.snapOut[key] = true
	t.mu.Unlock()
	t.wg.Go(func() {
		err := t.postSnapshot(group, p, m, checkpoint)
		if err != nil {
			t.log.Warn("sending a snapshot failed", zap.Uint64("group", group), zap.Uint64("peer", m.To), zap.Error(err))
		} else {
			t.log.Info("sent a snapshot", zap.Uint64("group", group), zap.Uint64("peer", m.To), zap.Uint64("index", m.Snapshot.Metadata.Index))
		}
		t.mu.Lock()
		delete(t.snapOut, key)
		t.mu.Unlock()
		done(err == nil)
	})
}

// postSnapshot checkpoints group's state database and streams it to p.
func (t *httpTransport) postSnapshot(group uint64, p *peer, m pb.Message, checkpoint func(dir string) error) error {
	scratch, err := t.h.newScratch(group, "out")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	dir := filepath.Join(scratch, "db") // the checkpoint makes it
	if err := checkpoint(dir); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeSnapshot(pw, m, dir)) }()
	req, err := http.NewRequest(http.MethodPost, p.url(pathSnapshot), pr)
	if err != nil {
		pr.Close()
		return err
	}
	req.Header.Set(headerFrom, strconv.FormatUint(t.id, 10))
	req.Header.Set(headerTo, strconv.FormatUint(m.To, 10))
	req.Header.Set(headerGroup, strconv.FormatUint(group, 10))
	resp, err := p.client.Do(req)
	pr.CloseWithError(errors.New("request done"))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("peer answered %s: %s", resp.Status, body)
	}
	return nil
}

// writeSnapshot writes m and the files of dir.
func writeSnapshot(w io.Writer, m pb.Message, dir string) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := binary.Write(bw, binary.BigEndian, uint32(len(data))); err != nil {
		return err
	}
	if _, err := bw.Write(data); err != nil {
		return err
	}
	tw := tar.NewWriter(bw)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("checkpoint holds %s, not a regular file", e.Name())
		}
		if err := addFile(tw, dir, e.Name()); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func addFile(tw *tar.Writer, dir, name string) error {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// serveSnapshot receives a snapshot: one at a time, only from the leader
// this node follows, written and synced to a scratch directory before the
// node sees it.
func (t *httpTransport) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	from, ok := t.checkSender(w, r)
	if !ok {
		return
	}
	group, ok := groupParam(w, r)
	if !ok {
		return
	}
	// Only a leader sends snapshots, and this node hears from its leader
	// (an append it could not take) before the leader decides to send one:
	// anything else is refused before a byte of it reaches the disk.
	if lead := t.h.following(group); lead != from {
		t.refuse(w, r, http.StatusConflict, fmt.Sprintf("node %d is not the leader this node follows in group %d (%d); snapshots come from the leader", from, group, lead))
		return
	}
	rc := http.NewResponseController(w)
	in := &snapReceive{from: from, abort: func() { _ = rc.SetReadDeadline(time.Now()) }, done: make(chan struct{})}
	if !t.claimSnapshot(group, in) {
		http.Error(w, "a snapshot is already being received", http.StatusServiceUnavailable)
		return
	}
	defer t.releaseSnapshot(group, in)
	m, dir, err := t.readSnapshot(r.Body, group, from)
	if err != nil {
		t.log.Warn("receiving a snapshot failed", zap.Uint64("group", group), zap.Uint64("peer", from), zap.Error(err))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := t.h.receiveSnapshot(group, m, dir); err != nil {
		os.RemoveAll(dir)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	t.log.Info("received a snapshot", zap.Uint64("peer", from), zap.Uint64("index", m.Snapshot.Metadata.Index))
	w.WriteHeader(http.StatusNoContent)
}

// snapReceive is a snapshot being received for a group.
type snapReceive struct {
	from  uint64
	abort func()        // fails its request's reads
	done  chan struct{} // closed once its handler has let go of the group
}

// snapshotTakeoverWait bounds how long a snapshot from the leader waits
// for an aborted one to let go of its group before it is refused (503;
// the leader sends it again).
const snapshotTakeoverWait = 2 * time.Second

// claimSnapshot makes in the group's one snapshot being received, or
// reports false. One under way from the same node keeps the group: the
// leader is sending again what it is still sending. One under way from
// another node is aborted, since in's sender is the leader this node now
// follows (serveSnapshot checked it): a leader deposed in the middle of
// a send (frozen, cut off) would otherwise hold the group until its
// stream's stall timeout, while the new leader, which may need this node
// for its quorum, could not catch it up.
func (t *httpTransport) claimSnapshot(group uint64, in *snapReceive) bool {
	t.mu.Lock()
	old := t.snapIn[group]
	if t.closed || (old != nil && old.from == in.from) {
		t.mu.Unlock()
		return false
	}
	if old == nil {
		t.snapIn[group] = in
		t.mu.Unlock()
		return true
	}
	t.mu.Unlock()
	t.log.Info("aborting a snapshot a former leader is sending: its successor sends one",
		zap.Uint64("group", group), zap.Uint64("from", old.from), zap.Uint64("leader", in.from))
	old.abort()
	select {
	case <-old.done:
	case <-time.After(snapshotTakeoverWait):
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.snapIn[group] != nil {
		return false
	}
	t.snapIn[group] = in
	return true
}

// releaseSnapshot lets go of the group in holds.
func (t *httpTransport) releaseSnapshot(group uint64, in *snapReceive) {
	t.mu.Lock()
	if t.snapIn[group] == in {
		delete(t.snapIn, group)
	}
	t.mu.Unlock()
	close(in.done)
}

// readSnapshot reads the message and the files into a new directory.
func (t *httpTransport) readSnapshot(body io.Reader, group, from uint64) (pb.Message, string, error) {
	var m pb.Message
	br := bufio.NewReaderSize(body, 256<<10)
	var n uint32
	if err := binary.Read(br, binary.BigEndian, &n); err != nil {
		return m, "", err
	}
	if n > maxSnapMsgBytes {
		return m, "", fmt.Errorf("snapshot message of %d bytes", n)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(br, data); err != nil {
		return m, "", err
	}
	if err := m.Unmarshal(data); err != nil {
		return m, "", err
	}
	if m.Type != pb.MsgSnap || m.From != from || m.To != t.id || m.Snapshot == nil {
		return m, "", fmt.Errorf("not a snapshot for node %d: %s from %d to %d", t.id, m.Type, m.From, m.To)
	}
	dir, err := t.h.newScratch(group, "in")
	if err != nil {
		return m, "", err
	}
	if err := readFiles(tar.NewReader(br), dir); err != nil {
		os.RemoveAll(dir)
		return m, "", err
	}
	return m, dir, nil
}

// readFiles extracts a tar of plain files into dir and syncs them.
func readFiles(tr *tar.Reader, dir string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return syncDir(dir)
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || h.Name == "" || h.Name != filepath.Base(h.Name) ||
			strings.HasPrefix(h.Name, ".") {
			return fmt.Errorf("snapshot holds %q, not a plain file name", h.Name)
		}
		if err := writeFile(filepath.Join(dir, h.Name), tr); err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}
