package namespace

import (
	"encoding/binary"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// Key tags of the registry and of the namespaces' ranges (doc.go).
const (
	tagNextID  = 'c'
	tagDefault = 'd'
	tagRecord  = 'n'
	tagData    = 'p'
)

var (
	keyNextID  = []byte{tagNextID}
	keyDefault = []byte{tagDefault}
)

// recordKey is the key of a namespace's record.
func recordKey(name string) []byte { return append([]byte{tagRecord}, name...) }

// dataPrefix is the start of a namespace's key range.
func dataPrefix(id uint64) []byte { return DataPrefix(id) }

// DataPrefix is the start of the key range of the namespace with id id
// (not the default one): its brokers' keys, in a registry's store or
// in a data group of a cluster.
func DataPrefix(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{tagData}, id)
}

// Record is the persisted form of a namespace: in the store, or kept by
// a [Shared].
type Record struct {
	ID      uint64 `json:",omitempty"` // 0 for the default namespace
	Name    string
	Created time.Time
	// Rules are the namespace's own authorization rules; none: it uses
	// the registry's root rules.
	Rules []core.AuthorizationRule `json:",omitempty"`
	// Limits are the namespace's own limits; a zero field takes the
	// registry's default.
	Limits Limits `json:",omitzero"`
	// Ahead is how far the test clock was moved forward.
	Ahead time.Duration `json:",omitempty"`
}
