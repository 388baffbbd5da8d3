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
func dataPrefix(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{tagData}, id)
}

// record is the persisted form of a namespace.
type record struct {
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
