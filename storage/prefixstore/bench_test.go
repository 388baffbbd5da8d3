package prefixstore_test

import (
	"encoding/binary"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
	"github.com/omnibusmq/omnibus/storage/prefixstore"
)

// discard is a store whose Apply does nothing, so that what the view
// adds is all that is measured.
type discard struct{ storage.Store }

func (discard) Apply(*storage.Batch) error { return nil }

// BenchmarkApply: what the view adds to a batch shaped like a send's (a
// 1 KiB body record and a state record, 17-byte keys), over a store that
// does nothing with it.
//
//	go test ./storage/prefixstore -run '^$' -bench Apply -count 6
func BenchmarkApply(b *testing.B) {
	value, state := make([]byte, 1024), make([]byte, 24)
	for _, name := range []string{"direct", "view"} {
		b.Run(name, func(b *testing.B) {
			under := discard{memstore.New()}
			defer under.Close()
			var st storage.Store = under
			if name == "view" {
				st = prefixstore.New(under, []byte("p\x00\x00\x00\x00\x00\x00\x00\x01"))
			}
			b.ReportAllocs()
			var i uint64
			for b.Loop() {
				i++
				batch := storage.Batch{Sync: true}
				batch.Set(binary.BigEndian.AppendUint64([]byte{'B', 0, 0, 0, 0, 0, 0, 0, 1}, i), value)
				batch.Set(binary.BigEndian.AppendUint64([]byte{'Q', 0, 0, 0, 0, 0, 0, 0, 1}, i), state)
				if err := st.Apply(&batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
