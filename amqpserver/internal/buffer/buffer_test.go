package buffer

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadWrite(t *testing.T) {
	var b Buffer
	b.AppendByte(1)
	b.AppendUint16(0x0203)
	b.AppendUint32(0x04050607)
	b.AppendUint64(0x08090a0b0c0d0e0f)
	b.AppendString("hi")
	b.Append([]byte{0xff})
	if b.Len() != 18 || b.Size() != 18 {
		t.Fatalf("Len %d Size %d, want 18", b.Len(), b.Size())
	}
	if c, err := b.PeekByte(); err != nil || c != 1 {
		t.Errorf("PeekByte = %v, %v", c, err)
	}
	if c, err := b.ReadByte(); err != nil || c != 1 {
		t.Errorf("ReadByte = %v, %v", c, err)
	}
	if v, err := b.ReadUint16(); err != nil || v != 0x0203 {
		t.Errorf("ReadUint16 = %x, %v", v, err)
	}
	if v, err := b.ReadUint32(); err != nil || v != 0x04050607 {
		t.Errorf("ReadUint32 = %x, %v", v, err)
	}
	if v, err := b.ReadUint64(); err != nil || v != 0x08090a0b0c0d0e0f {
		t.Errorf("ReadUint64 = %x, %v", v, err)
	}
	if p, ok := b.Next(2); !ok || string(p) != "hi" {
		t.Errorf("Next(2) = %q, %v", p, ok)
	}
	if _, ok := b.Next(2); ok {
		t.Error("Next past the end succeeded")
	}
	if _, ok := b.Next(-1); ok {
		t.Error("Next(-1) succeeded")
	}
	if diff := cmp.Diff([]byte{0xff}, b.Bytes()); diff != "" {
		t.Errorf("Bytes (-want +got):\n%s", diff)
	}
	if !b.Skip(1) || b.Len() != 0 {
		t.Errorf("Skip(1) left %d bytes", b.Len())
	}
	for name, read := range map[string]func() error{
		"ReadByte":   func() error { _, err := b.ReadByte(); return err },
		"PeekByte":   func() error { _, err := b.PeekByte(); return err },
		"ReadUint16": func() error { _, err := b.ReadUint16(); return err },
		"ReadUint32": func() error { _, err := b.ReadUint32(); return err },
		"ReadUint64": func() error { _, err := b.ReadUint64(); return err },
	} {
		if err := read(); !errors.Is(err, ErrShort) {
			t.Errorf("%s on empty buffer = %v, want ErrShort", name, err)
		}
	}
}

func TestUnreadReclaimTruncate(t *testing.T) {
	b := New([]byte("abcdef"))
	b.Next(4)
	if !b.Unread(1) || string(b.Bytes()) != "def" {
		t.Errorf("after Unread(1): %q", b.Bytes())
	}
	if b.Unread(10) {
		t.Error("Unread beyond start succeeded")
	}
	b.Truncate(1) // would cut read bytes: ignored
	if string(b.Bytes()) != "def" {
		t.Errorf("Truncate into read bytes changed contents: %q", b.Bytes())
	}
	b.Truncate(5)
	if string(b.Bytes()) != "de" {
		t.Errorf("Truncate(5): %q", b.Bytes())
	}
	b.Reclaim()
	if string(b.Raw()) != "de" || b.Size() != 2 {
		t.Errorf("Reclaim: raw %q", b.Raw())
	}
	b.Reset()
	if b.Len() != 0 || b.Size() != 0 {
		t.Error("Reset left data")
	}
	m := Make([]byte("x"))
	if m.Len() != 1 {
		t.Errorf("Make: Len %d", m.Len())
	}
}

func TestGrowAvoidsAllocations(t *testing.T) {
	var b Buffer
	b.Grow(64)
	allocs := testing.AllocsPerRun(10, func() {
		b.Reset()
		b.AppendUint64(1)
		b.AppendString("0123456789")
	})
	if allocs != 0 {
		t.Errorf("appends after Grow allocate %v times", allocs)
	}
}
