package app

import (
	"encoding/binary"
	"sync"

	"github.com/omnibusmq/omnibus/core"
)

// Every send, receive and settlement of a cluster with data groups is
// routed: the queue's or topic's group (and, for a partitioned one, its
// spread) comes from this node's replica of the meta group. Read there
// each time, that was two or three Pebble gets per call, about 1 µs of
// CPU per message summed over the nodes (3 nodes, 2026-11-30 profiles),
// a cost one group never pays. placeCache keeps what the replica said,
// for as long as the replica stands still: any entry the meta group
// applies (a placement, a spread, a delete, a namespace) moves its
// applied index and empties the cache, so an answer from it is never
// older than what reading the replica would give.

// maxCachedPlaces bounds the cache: names are kept as asked (a client can
// vary a name's case), so past this many the cache starts over.
const maxCachedPlaces = 4096

// placeCache maps a queue's or topic's name, as asked, to its place.
type placeCache struct {
	mu      sync.Mutex
	applied uint64 // the replica's applied index the entries were read at
	by      map[string]cachedPlace
}

// cachedPlace is where a queue or topic lives: its group (a partitioned
// one's partition 0's) and, when partitioned over the groups, its spread
// (shared: never modified).
type cachedPlace struct {
	group  uint64
	spread *core.Spread
}

// get returns name's place if it was read at applied; a cache read at
// another index is emptied first.
func (c *placeCache) get(name string, applied uint64) (cachedPlace, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.applied != applied {
		clear(c.by)
		c.applied = applied
		return cachedPlace{}, false
	}
	p, ok := c.by[name]
	return p, ok
}

// put keeps p for name, read from the replica at applied (or later); it
// is dropped when the cache has moved on from applied.
func (c *placeCache) put(name string, applied uint64, p cachedPlace) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.applied != applied {
		return
	}
	if c.by == nil || len(c.by) >= maxCachedPlaces {
		c.by = map[string]cachedPlace{}
	}
	c.by[name] = p
}

// placeOf returns name's place from this node's replica of the meta
// group, through the cache; false when the replica has none (not placed
// yet, or not known here yet) or it cannot be read: the callers then ask
// as before.
func (r *routed) placeOf(name string) (cachedPlace, bool) {
	// Read the index first: the replica's state is written before its
	// applied index moves, so what is read next is at least this new.
	applied := r.meta.Applied()
	if p, ok := r.places.get(name, applied); ok {
		return p, true
	}
	v, err := r.meta.ReadReplica(placementKey(name))
	if err != nil || len(v) != 8 {
		return cachedPlace{}, false
	}
	p := cachedPlace{group: binary.BigEndian.Uint64(v)}
	if v, err := r.meta.ReadReplica(spreadKey(name)); err == nil {
		if p.spread, err = decodeSpread(v); err != nil {
			return cachedPlace{}, false
		}
	}
	r.places.put(name, applied, p)
	return p, true
}
