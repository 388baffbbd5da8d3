package app

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"strings"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/emuconfig"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/raftstore"
)

// The config file in a cluster with data groups. Its entities are
// created by the meta group's leader once placements can be made
// (applyConfigLoop), a moment after the nodes start: until then a link to
// one of them would find no placement and be refused amqp:not-found,
// which the SDKs take as final. So the meta leader records, once it has
// applied the file, the file's digest in the meta group
// (configAppliedKey); until a node's copy of the meta group holds the
// digest of the file it started with,
//
//   - a queue or topic the file names that has no placement yet, or is
//     placed but not created yet, is answered server busy (retry), not
//     not-found (configPending, pendingBackend);
//   - a key name "rule@ns" of a namespace it does not know is answered
//     server busy too (sharedRegistry.CatchUp fails);
//   - the node does not say it is ready (Cluster.ConfigApplied, which
//     `omnibus` waits for before its "ready" lines).
//
// A new file (another digest) is pending again until a meta leader
// applied it; each new meta leader applies the file anyway.

// configAppliedKey is the meta group's record of the digest of the
// config file its leader applied last.
const configAppliedKey = "F"

// configState is what a node knows of its config file.
type configState struct {
	digest []byte          // sha256 of the file; nil: no file
	names  map[string]bool // lower-case names of its queues and topics, every namespace
}

// loadConfigState reads the config file at path for its digest and the
// names of cfg's queues and topics.
func loadConfigState(path string, cfg *emuconfig.Config) (configState, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return configState{}, err
	}
	sum := sha256.Sum256(raw)
	st := configState{digest: sum[:], names: map[string]bool{}}
	for _, ns := range cfg.Namespaces {
		for _, e := range ns.Entities {
			if e.Kind != core.KindSubscription {
				st.names[strings.ToLower(e.Name)] = true
			}
		}
	}
	return st, nil
}

// configApplied reports whether this node's copy of the meta group holds
// the digest of its config file (true without a file).
func (r *routed) configApplied() bool {
	select {
	case <-r.configDone:
		return true
	default:
		return false
	}
}

// configPending reports whether name (a queue or topic of any namespace,
// unqualified) is one the config file creates and the file is not
// applied yet: a lookup that finds no placement for it is to be retried.
func (r *routed) configPending(name string) bool {
	return !r.configApplied() && r.cfgState.names[strings.ToLower(name)]
}

// configPendingError is the answer for an entity the config file
// creates, asked before the file was applied: a server-busy core.Error to
// clients (Unwrap), and to the meta leader applying the file, an entity
// still to create (applyEntity asks errors.Is(err, errConfigPendingKind)).
type configPendingError struct{ busy *core.Error }

func (e configPendingError) Error() string        { return e.busy.Error() }
func (e configPendingError) Unwrap() error        { return e.busy }
func (e configPendingError) Is(target error) bool { return target == errConfigPendingKind }

// errConfigPendingKind matches every configPendingError.
var errConfigPendingKind = errors.New("an entity of the config file not applied yet")

// errConfigPending is the configPendingError of name.
func errConfigPending(name string) error {
	return configPendingError{&core.Error{Code: core.CodeServerBusy,
		Msg: "The messaging entity '" + name + "' is in the config file, which the cluster is still applying; retry shortly."}}
}

// markConfigApplied records, on the meta leader, that the config file was
// applied (a no-op when the meta group holds its digest already).
func (r *routed) markConfigApplied(sess *raftstore.Session) error {
	if v, err := sess.Get([]byte(configAppliedKey)); err == nil && bytes.Equal(v, r.cfgState.digest) {
		return nil
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	b := &storage.Batch{Sync: true}
	b.Set([]byte(configAppliedKey), r.cfgState.digest)
	return sess.Apply(b)
}

// watchConfigApplied closes configDone once this node's copy of the meta
// group holds the config file's digest (at once without a file).
func (r *routed) watchConfigApplied() {
	defer close(r.configDone)
	if r.cfgState.digest == nil {
		return
	}
	for {
		moved := r.meta.AppliedMoved()
		if v, err := r.meta.ReadReplica([]byte(configAppliedKey)); err == nil && bytes.Equal(v, r.cfgState.digest) {
			r.log.Info("the config file is applied: serving its entities")
			return
		}
		select {
		case <-moved: // the digest comes in an entry of the meta group
		case <-r.cl.ctx.Done():
			return
		}
	}
}

// ConfigApplied is closed once this node serves the config file's
// entities: in a cluster with data groups, when the meta leader has
// applied the file and this node's copy of the meta group says so;
// otherwise at once. `omnibus` says it is ready only then. (It is also
// closed when the node stops.)
func (cl *Cluster) ConfigApplied() <-chan struct{} {
	if cl.node.DataGroups() == 0 {
		done := make(chan struct{})
		close(done)
		return done
	}
	return cl.routed.configDone
}

// pendingBackend is the backend of a queue or topic of the config file
// placed already but maybe not created in its group yet (the meta leader
// places, then creates): until the file is applied, not finding it there
// is pending too, not final.
type pendingBackend struct {
	core.Backend
	r    *routed
	name string
}

// GetEntity implements core.Backend.
func (p pendingBackend) GetEntity(path string) (*core.Entity, error) {
	e, err := p.Backend.GetEntity(path)
	if errors.Is(err, core.ErrNotFound) && p.r.configPending(p.name) {
		return nil, errConfigPending(p.name)
	}
	return e, err
}

// pendingIfConfig wraps be as a pendingBackend while name is an entity of
// a config file not applied yet.
func (r *routed) pendingIfConfig(be core.Backend, err error, name string) (core.Backend, error) {
	if err != nil || !r.configPending(name) {
		return be, err
	}
	return pendingBackend{Backend: be, r: r, name: name}, nil
}
