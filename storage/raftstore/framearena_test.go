package raftstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// TestFrameArenaTakesDoNotShare: buffers of random sizes, small and over
// a quarter chunk, each filled with its own byte, keep their bytes while
// later ones are taken and filled, and none can grow into the next.
func TestFrameArenaTakesDoNotShare(t *testing.T) {
	var a frameArena
	var bufs [][]byte
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		n := rng.IntN(4 << 10)
		if i%97 == 0 {
			n = arenaChunkBytes/4 + rng.IntN(arenaChunkBytes)
		}
		b := a.take(n)
		if len(b) != n || cap(b) != n {
			t.Fatalf("take(%d): len %d cap %d", n, len(b), cap(b))
		}
		for j := range b {
			b[j] = byte(i)
		}
		bufs = append(bufs, b)
	}
	for i, b := range bufs {
		for j, c := range b {
			if c != byte(i) {
				t.Fatalf("buffer %d, byte %d: %d, overwritten by a later take", i, j, c)
			}
		}
	}
}

// TestReadFrameKeepsWhatItRead: frames read one after another from one
// stream, small ones into the arena and ones over keepBufBytes through
// the reused buffer, each decode to what was sent and stay so while the
// frames after them are read.
func TestReadFrameKeepsWhatItRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var sent []*frame
	var stream bytes.Buffer
	index := uint64(1)
	for i := range 60 {
		per, size := 1+rng.IntN(8), 1+rng.IntN(3000)
		if i%20 == 7 || i%20 == 8 {
			per, size = 3, keepBufBytes/2 // two frames over keepBufBytes in a row
		}
		ents := make([]pb.Entry, per)
		for j := range ents {
			ents[j] = pb.Entry{Term: 2, Index: index, Data: randomBytes(rng, size)}
			index++
		}
		f := &frame{group: 1, from: 1, to: 2, msgs: []pb.Message{
			{Type: pb.MsgApp, To: 2, From: 1, Term: 2, Index: ents[0].Index - 1, LogTerm: 2, Entries: ents},
			{Type: pb.MsgHeartbeat, To: 2, From: 1, Term: 2},
		}}
		body, err := appendFrame(nil, f)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, f)
		stream.Write(body)
	}

	var arena frameArena
	var big []byte
	var got []*frame
	bigFrames := 0
	for i, f := range sent {
		n, _ := appendFrame(nil, f)
		if len(n) > keepBufBytes {
			bigFrames++
		}
		r, err := readFrame(&stream, &arena, &big, len(n), keepBufBytes)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		got = append(got, r)
	}
	if bigFrames < 2 {
		t.Fatalf("only %d frames over keepBufBytes: the reused buffer's path is not exercised", bigFrames)
	}
	for i := range sent {
		if !reflect.DeepEqual(got[i].msgs, sent[i].msgs) {
			t.Fatalf("frame %d changed while the frames after it were read", i)
		}
	}
}

// recordReader hands out at most 16 KiB per Read, as a TLS connection
// does (one record), and counts the bytes that went into reads of a
// bufio's size (its buffer filling: 64 KiB or 4 KiB) and into any other.
type recordReader struct {
	r              io.Reader
	filled, direct int
}

func (c *recordReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(len(p), 16<<10)])
	if len(p) == readBufBytes || len(p) == 4096 {
		c.filled += n
	} else {
		c.direct += n
	}
	return n, err
}

// TestBodyReaderReadsPastTheBuffer: length-prefixed frames of every size
// read as readFrames reads them, prefixes through bufio and bodies
// through bodyReader, from a 4 KiB reader that already holds the first
// bytes (as net/http's does when it hands a connection over), come out
// as sent, and the bodies' bytes past what was buffered come straight
// from the connection, not through a buffer.
func TestBodyReaderReadsPastTheBuffer(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var stream bytes.Buffer
	var bodies [][]byte
	for i := range 200 {
		n := 1 + rng.IntN(200)
		if i%3 == 0 {
			n = 20<<10 + rng.IntN(100<<10)
		}
		b := randomBytes(rng, n)
		bodies = append(bodies, b)
		stream.Write(binary.BigEndian.AppendUint32(nil, uint32(n)))
		stream.Write(b)
	}
	total := stream.Len()
	conn := &recordReader{r: &stream}
	src := bufio.NewReaderSize(conn, 4096)
	if _, err := src.Peek(100); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(src, readBufBytes)
	var hdr [4]byte
	for i, want := range bodies {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			t.Fatalf("frame %d's length: %v", i, err)
		}
		got := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(bodyReader{br, src}, got); err != nil {
			t.Fatalf("frame %d's body: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: body read differs from the one sent", i)
		}
	}
	if conn.direct < total/2 {
		t.Fatalf("%d of %d bytes read straight into the bodies, %d through bufio's buffer: want most straight",
			conn.direct, total, conn.filled)
	}
}
