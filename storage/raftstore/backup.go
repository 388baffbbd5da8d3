package raftstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// Backups (`omnibus backup`, cmd/omnibus/app/backup.go). A backup of a
// cluster is a checkpoint of one node's state database, taken once that
// node has applied everything the serving leader had committed when the
// backup began: every write acknowledged before then is in it, whichever
// node takes it. Traffic goes on meanwhile (a checkpoint hard-links the
// database's files after a flush).

// BackupInfo describes a backup a node took.
type BackupInfo struct {
	// Node took it; Leader was serving when it began, at Term.
	Node, Leader, Term uint64
	// Index is the leader's commit index when the backup began: the
	// checkpoint holds the log at least up to it.
	Index uint64
}

// backupPoll is how often Backup checks on the leader and the applier.
const backupPoll = 10 * time.Millisecond

// Backup writes a checkpoint of the state database into dir (which must
// not exist) holding at least every entry the serving leader had
// committed when Backup was called, so every write acknowledged before
// then. It waits (until ctx ends) for a leader that serves, and for this
// node to apply up to that leader's commit index.
func (n *Node) Backup(ctx context.Context, dir string) (BackupInfo, error) {
	info, err := n.backupTarget(ctx)
	if err != nil {
		return info, err
	}
	if err := n.WaitApplied(ctx, info.Index); err != nil {
		return info, fmt.Errorf("raftstore: backup: %w", err)
	}
	if err := n.state.checkpoint(dir); err != nil {
		return info, fmt.Errorf("raftstore: backup: %w", err)
	}
	return info, nil
}

// backupTarget asks the serving leader for its commit index: it covers
// every write acknowledged so far (a leader serves only once it has
// committed an entry of its own term, after all earlier ones).
func (n *Node) backupTarget(ctx context.Context) (BackupInfo, error) {
	info := BackupInfo{Node: n.id}
	var why error
	for {
		st := n.Status()
		switch {
		case st.Leader == n.id && st.Serving:
			info.Leader, info.Term, info.Index = n.id, st.Term, st.Commit
			return info, nil
		case st.Leader != 0 && st.Leader != n.id:
			addr := ""
			for _, m := range st.Members {
				if m.ID == st.Leader {
					addr = m.Addr
				}
			}
			ls, err := n.client.Status(ctx, addr)
			if err == nil && ls.Serving && ls.Leader == ls.ID {
				info.Leader, info.Term, info.Index = ls.ID, ls.Term, ls.Commit
				return info, nil
			}
			why = fmt.Errorf("leader %d at %s: serving %v, %v", st.Leader, addr, ls.Serving, err)
		default:
			why = errors.New("no leader known")
		}
		select {
		case <-ctx.Done():
			return info, fmt.Errorf("raftstore: backup: no serving leader to say what was acknowledged (%v): %w", why, ctx.Err())
		case <-n.stopc:
			return info, storage.ErrClosed
		case <-time.After(backupPoll):
		}
	}
}

// RestoreState makes dir the directory of a node that starts a new
// cluster from restored data: a state database holding the core keys and
// values scan gives (nothing of the old cluster's log, members or applied
// index), flushed. The node started on it must be the new cluster's only
// founding member (Open refuses more: the others would start from empty
// databases); the others join and receive it as a snapshot.
func RestoreState(dir string, scan func(fn func(key, value []byte) error) error) error {
	if _, err := os.Stat(filepath.Join(dir, stateFile)); err == nil {
		return fmt.Errorf("raftstore: %s already holds a node's state", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := stateDirName(1)
	db, err := pebblestore.Open(filepath.Join(dir, name), pebblestore.Options{NoWAL: true})
	if err != nil {
		return err
	}
	const batchBytes = 4 << 20
	b, size := &storage.Batch{}, 0
	flush := func() error {
		if len(b.Ops) == 0 {
			return nil
		}
		err := db.Apply(b)
		b, size = &storage.Batch{}, 0
		return err
	}
	err = scan(func(key, value []byte) error {
		k := append([]byte{dataPrefix}, key...)
		b.Set(k, append([]byte(nil), value...))
		if size += len(k) + len(value); size >= batchBytes {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		var done <-chan struct{}
		if done, err = db.StartFlush(); err == nil {
			<-done
		}
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raftstore: restore: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, stateFile), []byte(name+"\n"))
}

// checkRestoredStart refuses to bootstrap a group of several members on a
// state database that already holds data with a new log: the other
// founding members would apply the same log to empty databases.
func (n *Node) checkRestoredStart(fresh bool) error {
	if !fresh || n.cfg.Join || len(n.cfg.Peers) < 2 {
		return nil
	}
	hasData := false
	err := n.state.scan(nil, nil, func(_, _ []byte) (bool, error) {
		hasData = true
		return false, nil
	})
	if err != nil {
		return err
	}
	if hasData {
		return fmt.Errorf("raftstore: %s holds restored data and no Raft log: start this node alone (--peers with "+
			"only itself), then add the others with join tokens, --join and `omnibus cluster add`, so that they "+
			"receive the data", n.cfg.Dir)
	}
	return nil
}
