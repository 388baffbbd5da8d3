package app

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// A backup (`omnibus backup --to DIR`) is a directory:
//
//	BACKUP.json   the Manifest, written last: a directory without it is
//	              not a backup (one cut short)
//	db/           a Pebble checkpoint of the store: a single node's
//	              whole store, or a cluster node's state database
//
// The running omnibus makes the checkpoint (hard links, after a flush)
// into a scratch directory beside its store and streams it over the admin
// socket as a tar (BACKUP.json first); the client writes and fsyncs the
// files, then the manifest. Traffic goes on throughout.

// Backup kinds.
const (
	KindSingle  = "single"  // a single node's store: the core's keys as they are
	KindCluster = "cluster" // a cluster node's state database: the core's keys under 'd', and the node's own
)

// ManifestName is the manifest's file name in a backup.
const ManifestName = "BACKUP.json"

// backupFormat is the version of the layout above.
const backupFormat = 1

// maxBackupWait bounds how long the admin socket waits for a cluster
// node to catch up before it checkpoints.
const maxBackupWait = 5 * time.Minute

// Manifest describes a backup.
type Manifest struct {
	Format int    `json:"format"`
	Kind   string `json:"kind"`
	// Began is when the node took the request: every write acknowledged
	// before it is in the backup.
	Began time.Time `json:"began"`
	// Node, Leader, Term and Index (cluster): the node that took it, the
	// leader serving when it began and its commit index then, which the
	// checkpoint holds at least.
	Node   uint64 `json:"node,omitempty"`
	Leader uint64 `json:"leader,omitempty"`
	Term   uint64 `json:"term,omitempty"`
	Index  uint64 `json:"index,omitempty"`
	// Files are the checkpoint's files (in db/) and their sizes.
	Files map[string]int64 `json:"files"`
}

// backupScratchPrefix names scratch directories of backups in progress
// (removed when the admin socket starts, after a crash).
const backupScratchPrefix = "omnibus-backup-"

// serveBackup takes a checkpoint with backup and streams it.
func (a *adminServer) serveBackup(w http.ResponseWriter, r *http.Request, backup backupFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), maxBackupWait)
	defer cancel()
	scratch, err := os.MkdirTemp(a.scratch, backupScratchPrefix)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer os.RemoveAll(scratch)
	db := filepath.Join(scratch, "db")
	began := time.Now()
	m, err := backup(ctx, db)
	if err != nil {
		a.log.Warn("backup failed", zap.Error(err))
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	m.Format, m.Began, m.Files = backupFormat, began, map[string]int64{}
	entries, err := os.ReadDir(db)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			http.Error(w, fmt.Sprintf("checkpoint holds %s, not a regular file", e.Name()), http.StatusInternalServerError)
			return
		}
		m.Files[e.Name()] = fi.Size()
	}
	w.Header().Set("Content-Type", "application/x-tar")
	if err := writeBackup(w, m, db); err != nil {
		a.log.Warn("sending a backup failed", zap.Error(err))
		return
	}
	a.log.Info("backup taken", zap.String("kind", m.Kind), zap.Int("files", len(m.Files)),
		zap.Uint64("index", m.Index), zap.Duration("took", time.Since(began)))
}

// writeBackup writes the manifest, then the checkpoint's files, as a tar.
func writeBackup(w io.Writer, m Manifest, db string) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: ManifestName, Mode: 0o644, Size: int64(len(mb)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(mb); err != nil {
		return err
	}
	for name, size := range m.Files {
		if err := copyIntoTar(tw, filepath.Join(db, name), "db/"+name, size); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func copyIntoTar(tw *tar.Writer, path, name string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, size) // the checkpoint's files do not change
	return err
}

// TakeBackup asks the omnibus whose admin socket is socket for a backup
// and writes it into dir, which must not exist or be empty.
func TakeBackup(ctx context.Context, socket, dir string) (Manifest, error) {
	var m Manifest
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return m, fmt.Errorf("backup: %s is not empty", dir)
	}
	if err := os.MkdirAll(filepath.Join(dir, "db"), 0o755); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://omnibus/backup", nil)
	if err != nil {
		return m, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return m, fmt.Errorf("backup: the admin socket %s: %w (is omnibus running with that data directory, as this user?)", socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return m, fmt.Errorf("backup: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	m, err = readBackup(resp.Body, dir)
	if err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	return m, nil
}

// readBackup writes what writeBackup wrote into dir: the files, each
// fsynced, then the directory, then the manifest.
func readBackup(r io.Reader, dir string) (Manifest, error) {
	var m Manifest
	tr := tar.NewReader(bufio.NewReaderSize(r, 256<<10))
	h, err := tr.Next()
	if err != nil || h.Name != ManifestName || h.Size > 1<<20 {
		return m, fmt.Errorf("the stream does not start with %s (%v)", ManifestName, err)
	}
	mb, err := io.ReadAll(tr)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		return m, err
	}
	got := map[string]int64{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, err
		}
		name, ok := strings.CutPrefix(h.Name, "db/")
		if !ok || h.Typeflag != tar.TypeReg || name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			return m, fmt.Errorf("the stream holds %q, not a checkpoint file", h.Name)
		}
		if err := writeSynced(filepath.Join(dir, "db", name), tr); err != nil {
			return m, err
		}
		got[name] = h.Size
	}
	for name, size := range m.Files {
		if got[name] != size {
			return m, fmt.Errorf("%s: %d bytes received, the manifest says %d", name, got[name], size)
		}
	}
	if err := syncPath(filepath.Join(dir, "db")); err != nil {
		return m, err
	}
	if err := writeSynced(filepath.Join(dir, ManifestName), strings.NewReader(string(mb))); err != nil {
		return m, err
	}
	return m, syncPath(dir)
}

func writeSynced(path string, r io.Reader) error {
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

func syncPath(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ReadManifest reads a backup's manifest, checking it is one this build
// restores.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("%s holds no %s: not a backup, or one cut short", dir, ManifestName)
	}
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", ManifestName, err)
	}
	if m.Format != backupFormat || (m.Kind != KindSingle && m.Kind != KindCluster) {
		return m, fmt.Errorf("%s: format %d, kind %q: this omnibus restores format %d of kinds %s and %s",
			ManifestName, m.Format, m.Kind, backupFormat, KindSingle, KindCluster)
	}
	for name, size := range m.Files {
		fi, err := os.Stat(filepath.Join(dir, "db", name))
		if err != nil || fi.Size() != size {
			return m, fmt.Errorf("backup file db/%s: %v (size %d, the manifest says %d)", name, err, sizeOf(fi), size)
		}
	}
	return m, nil
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}
