package clusterrpc

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// MaxFrameBytes bounds a frame: a send of the largest batch a Raft entry
// takes (raftstore.MaxBatchBytes, 104 MiB) plus its framing. A frame's
// buffer grows as its bytes arrive, never from the length a peer claims.
const MaxFrameBytes = 112 << 20

// writeTimeout bounds one frame's write (plus a second per MiB): a peer
// that stopped reading loses its connection.
const writeTimeout = 5 * time.Second

// frameConn writes whole frames from several goroutines and reads them
// from one.
type frameConn struct {
	nc net.Conn
	br *bufio.Reader

	wmu sync.Mutex // guards the write side
	bw  *bufio.Writer
}

func newFrameConn(nc net.Conn, br *bufio.Reader) *frameConn {
	if br == nil {
		br = bufio.NewReaderSize(nc, 64<<10)
	}
	return &frameConn{nc: nc, br: br, bw: bufio.NewWriterSize(nc, 64<<10)}
}

// write writes one frame (payload without its length).
func (c *frameConn) write(payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	limit := writeTimeout + time.Duration(len(payload)>>20)*time.Second
	if err := c.nc.SetWriteDeadline(time.Now().Add(limit)); err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
	if _, err := c.bw.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := c.bw.Write(payload); err != nil {
		return err
	}
	return c.bw.Flush()
}

// read reads the next frame's payload into buf (reused when it fits).
func (c *frameConn) read(buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameBytes {
		return nil, fmt.Errorf("clusterrpc: a frame of %d bytes is over the cap of %d", n, MaxFrameBytes)
	}
	if cap(buf) >= int(n) {
		buf = buf[:n]
		_, err := io.ReadFull(c.br, buf)
		return buf, err
	}
	buf = buf[:0]
	for len(buf) < int(n) {
		step := min(int(n)-len(buf), max(len(buf), 1<<20))
		buf = append(buf, make([]byte, step)...)
		if _, err := io.ReadFull(c.br, buf[len(buf)-step:]); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

func (c *frameConn) close() error { return c.nc.Close() }
