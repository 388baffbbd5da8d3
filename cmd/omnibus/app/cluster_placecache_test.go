package app

import (
	"fmt"
	"testing"

	"github.com/omnibusmq/omnibus/core"
)

func TestPlaceCacheHoldsWhileTheReplicaStandsStill(t *testing.T) {
	var c placeCache
	if _, ok := c.get("q", 7); ok {
		t.Fatal("an empty cache answered")
	}
	sp := &core.Spread{Groups: []uint64{2, 3}}
	c.put("q", 7, cachedPlace{group: 2, spread: sp})
	c.put("r", 7, cachedPlace{group: 3})
	if p, ok := c.get("q", 7); !ok || p.group != 2 || p.spread != sp {
		t.Fatalf("q at the same index: %+v, %v; want group 2 and its spread", p, ok)
	}

	// The meta replica applied something: every place is read again.
	if p, ok := c.get("r", 8); ok {
		t.Fatalf("r answered from index 7 at index 8: %+v", p)
	}
	if _, ok := c.get("q", 8); ok {
		t.Fatal("q kept across a moved index")
	}

	// A reader that read the replica at 7 and puts after the cache moved
	// to 8 keeps nothing: its answer may be older than index 8's.
	c.put("q", 7, cachedPlace{group: 2})
	if _, ok := c.get("q", 8); ok {
		t.Fatal("a place read at index 7 was kept at index 8")
	}
}

func TestPlaceCacheIsBounded(t *testing.T) {
	var c placeCache
	c.get("", 1)
	for i := range maxCachedPlaces + 10 {
		c.put(fmt.Sprint("Q", i), 1, cachedPlace{group: 1})
	}
	if n := len(c.by); n > maxCachedPlaces {
		t.Fatalf("the cache holds %d names, over its bound of %d", n, maxCachedPlaces)
	}
	if _, ok := c.get(fmt.Sprint("Q", maxCachedPlaces+9), 1); !ok {
		t.Fatal("the latest name put was not kept")
	}
}
