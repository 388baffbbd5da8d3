package raftstore

// frameArena hands out the buffers a peer stream's frames are read into,
// so that a frame's entries can keep pointing into the bytes read
// (parseFrame with owned set) instead of each message that carries
// entries being copied out of one reused buffer. A follower receives
// every byte of the log this way, and that copy (bytes.Clone in
// unmarshalMessage) was 5-13 % of a one-group follower's CPU
// (storage/raftstore/RESULTS.md, 2026-12-03). Frames are cut one after
// another from chunks of arenaChunkBytes; a chunk is never written again
// once handed out, and the collector frees it when nothing read into it
// is held any more (the Raft log keeps entries until it is compacted).
// A frame over a quarter of a chunk gets a buffer of its own, so a chunk
// is not left three quarters unused. The one chunk an arena holds is the
// bound of what a stream keeps between frames, as its reused buffer was
// (keepBufBytes).
type frameArena struct {
	free []byte // the rest of the current chunk
}

// arenaChunkBytes is the size of a frameArena's chunks.
const arenaChunkBytes = keepBufBytes

// take returns a buffer of n bytes that no other take shares.
func (a *frameArena) take(n int) []byte {
	if n > arenaChunkBytes/4 {
		return make([]byte, n)
	}
	if len(a.free) < n {
		a.free = make([]byte, arenaChunkBytes)
	}
	b := a.free[:n:n]
	a.free = a.free[n:]
	return b
}
