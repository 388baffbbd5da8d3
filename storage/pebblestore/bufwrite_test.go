package pebblestore

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestBufferedFileKeepsEveryByte writes writes of every size around the
// buffer's through a bufferedFile and checks that the file holds exactly
// what was written, in order, whenever something looks at it: Stat, a
// read, a sync, Close.
func TestBufferedFileKeepsEveryByte(t *testing.T) {
	fs := vfs.NewMem()
	f, err := fs.Create("000001.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	bf := newBufferedFile(f)
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	sizes := []int{1, 4096, tableWriteBuffer - 1, 1, tableWriteBuffer, 3 * tableWriteBuffer, 4096, 17}
	for i := 0; i < 200; i++ {
		sizes = append(sizes, rng.IntN(2*tableWriteBuffer))
	}
	for i, n := range sizes {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		want = append(want, p...)
		if got, err := bf.Write(p); err != nil || got != n {
			t.Fatalf("write %d: %d, %v; want %d, nil", i, got, err, n)
		}
		switch i % 50 {
		case 10:
			st, err := bf.Stat()
			if err != nil || st.Size() != int64(len(want)) {
				t.Fatalf("after write %d: Stat size %v, %v; want %d", i, st.Size(), err, len(want))
			}
		case 20:
			got := make([]byte, len(want))
			if _, err := bf.ReadAt(got, 0); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("after write %d: ReadAt sees other bytes than written", i)
			}
		case 30:
			if err := bf.SyncData(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := bf.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := fs.Open("000001.sst")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes differing from the %d written", len(got), len(want))
	}
}

// TestStoreFilesAreBufferedOnlyForTables checks which files the store's
// file system gathers writes for: sstables and blob files, never the
// write-ahead log or the MANIFEST, whose every write must reach the file
// before its fsync.
func TestStoreFilesAreBufferedOnlyForTables(t *testing.T) {
	ffs := &faultFS{FS: vfs.NewMem(), faults: newFaults(), created: map[string]bool{}, storeDir: "."}
	for name, buffered := range map[string]bool{
		"000004.sst": true, "000005.blob": true, "000006.log": false, "MANIFEST-000001": false, "OPTIONS-000003": false,
	} {
		f, err := ffs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(*bufferedFile); ok != buffered {
			t.Errorf("%s: buffered %v, want %v", name, ok, buffered)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkTableWrites writes a 16 MiB file the way Pebble writes an
// sstable or blob file (in the 4 KiB writes its bufio.Writer hands on,
// then a sync) to the real disk, directly and through a bufferedFile;
// cpu-µs/MiB is the process's CPU time per MiB, most of it the system
// calls.
func BenchmarkTableWrites(b *testing.B) {
	const fileSize = 16 << 20
	block := make([]byte, 4096)
	for i := range block {
		block[i] = byte(i * 7)
	}
	for _, bc := range []struct {
		name string
		wrap func(vfs.File) vfs.File
	}{
		{"direct", func(f vfs.File) vfs.File { return f }},
		{"gathered", func(f vfs.File) vfs.File { return newBufferedFile(f) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			fs := vfs.Default
			b.SetBytes(fileSize)
			cpu0 := processCPU(b)
			for i := 0; b.Loop(); i++ {
				name := fs.PathJoin(dir, "000001.sst")
				f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
				if err != nil {
					b.Fatal(err)
				}
				f = bc.wrap(f)
				for n := 0; n < fileSize; n += len(block) {
					if _, err := f.Write(block); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				if err := fs.Remove(name); err != nil {
					b.Fatal(err)
				}
			}
			cpu := processCPU(b) - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/(fileSize>>20), "cpu-µs/MiB")
		})
	}
}
