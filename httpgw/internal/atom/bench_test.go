package atom

import (
	"bytes"
	"io"
	"testing"
)

func BenchmarkEncodeQueueEntry(b *testing.B) {
	e := Entry{ID: base + "q1", Title: "q1", Updated: updated, Author: "ns", Content: fullQueue()}
	b.ReportAllocs()
	for b.Loop() {
		if err := EncodeEntry(io.Discard, e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeQueueEntry(b *testing.B) {
	var buf bytes.Buffer
	if err := EncodeEntry(&buf, Entry{ID: base + "q1", Title: "q1", Updated: updated, Content: fullQueue()}); err != nil {
		b.Fatal(err)
	}
	body := buf.Bytes()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeEntry(bytes.NewReader(body)); err != nil {
			b.Fatal(err)
		}
	}
}
