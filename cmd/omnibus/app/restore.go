package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"github.com/omnibusmq/omnibus/storage/raftstore"
	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// RestoreOptions say what `omnibus restore` makes of a backup.
type RestoreOptions struct {
	// From is the backup's directory.
	From string
	// DataDir is the new node's data directory; it must hold no store.
	DataDir string
	// NodeID, when set, makes DataDir the first node of a new cluster
	// (any backup restores either way): its state database in
	// ClusterDir ("" means DataDir/cluster) and, unless PeerInsecure, a
	// new cluster CA and its certificate, as `omnibus cluster init`.
	NodeID       uint64
	ClusterDir   string
	PeerInsecure bool
	Logger       *zap.Logger
}

// RestoreResult says what Restore did.
type RestoreResult struct {
	Manifest Manifest
	// Keys are the store keys restored.
	Keys int
	// ClusterDir is the new cluster node's directory ("" for a single
	// node).
	ClusterDir string
}

// Restore makes a data directory from a backup: the core's keys of the
// backup's checkpoint (read from a copy: opening a Pebble checkpoint
// writes to it), written into a new single-node store, or into the state
// database of a new cluster's first node.
func Restore(o RestoreOptions) (res RestoreResult, err error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if res.Manifest, err = ReadManifest(o.From); err != nil {
		return res, err
	}
	if o.NodeID != 0 {
		res.ClusterDir = o.ClusterDir
		if res.ClusterDir == "" {
			res.ClusterDir = filepath.Join(o.DataDir, "cluster")
		}
	} else if entries, err := os.ReadDir(o.DataDir); err == nil && len(entries) > 0 {
		return res, fmt.Errorf("restore: %s is not empty: restore into a new data directory", o.DataDir)
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	scratch, err := os.MkdirTemp(filepath.Dir(filepath.Clean(o.DataDir)), ".omnibus-restore-")
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	defer os.RemoveAll(scratch)
	if err := copyDir(filepath.Join(o.From, "db"), scratch); err != nil {
		return res, fmt.Errorf("restore: copying the checkpoint: %w", err)
	}
	src, err := pebblestore.Open(scratch, pebblestore.Options{Logger: o.Logger.Named("backup"), DiskReserve: -1})
	if err != nil {
		return res, fmt.Errorf("restore: opening the backup: %w", err)
	}
	defer src.Close()
	var prefix []byte
	if res.Manifest.Kind == KindCluster {
		prefix = []byte{'d'} // raftstore's data prefix: the core's keys
	}
	scan := func(fn func(key, value []byte) error) error {
		return src.Scan(prefix, nil, func(k, v []byte) (bool, error) {
			res.Keys++
			return true, fn(k[len(prefix):], v)
		})
	}
	if o.NodeID == 0 {
		return res, restoreSingle(o, scan)
	}
	if err := raftstore.RestoreState(res.ClusterDir, scan); err != nil {
		return res, err
	}
	if o.PeerInsecure {
		return res, nil
	}
	_, err = peertls.Init(PeerTLSDir(res.ClusterDir), o.NodeID, time.Now())
	return res, err
}

// restoreSingle writes the keys into a new store in o.DataDir.
func restoreSingle(o RestoreOptions, scan func(fn func(key, value []byte) error) error) error {
	dst, err := pebblestore.Open(o.DataDir, pebblestore.Options{Logger: o.Logger.Named("pebble")})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	const batchBytes = 4 << 20
	b, size := &storage.Batch{}, 0
	flush := func(sync bool) error {
		b.Sync = sync
		err := dst.Apply(b)
		b, size = &storage.Batch{}, 0
		return err
	}
	err = scan(func(k, v []byte) error {
		b.Set(append([]byte(nil), k...), append([]byte(nil), v...))
		if size += len(k) + len(v); size >= batchBytes {
			return flush(false)
		}
		return nil
	})
	if err == nil {
		err = flush(true)
	}
	return errors.Join(err, dst.Close())
}

// copyDir copies the regular files of src into dst.
func copyDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s holds %s, not a regular file", src, e.Name())
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		err = writeSynced(filepath.Join(dst, e.Name()), in)
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
