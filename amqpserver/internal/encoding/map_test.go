package encoding

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

func TestMapHelpers(t *testing.T) {
	var m Map
	m.Set(Symbol("x-opt-sequence-number"), int64(1))
	m.Set("x-opt-sequence-number", "string key is a different key")
	m.Set([]byte{1}, "binary keys compare by content")
	m.Set([]any{1}, "lists never match")
	m.Set(Symbol("x-opt-sequence-number"), int64(2)) // replaces in place

	if got, ok := m.GetSymbol("x-opt-sequence-number"); !ok || got != int64(2) {
		t.Errorf("GetSymbol = %v, %v; want 2, true", got, ok)
	}
	if got, ok := m.GetString("x-opt-sequence-number"); !ok || got != "string key is a different key" {
		t.Errorf("GetString = %v, %v", got, ok)
	}
	if _, ok := m.Get([]byte{1}); !ok {
		t.Error("Get([]byte) did not find binary key")
	}
	if _, ok := m.Get([]any{1}); ok {
		t.Error("Get(list) found a list key")
	}
	if len(m) != 4 {
		t.Fatalf("len = %d, want 4", len(m))
	}
	m.Delete("x-opt-sequence-number")
	if _, ok := m.GetString("x-opt-sequence-number"); ok || len(m) != 3 {
		t.Errorf("Delete left %v", m)
	}
	if m[0].Key != Symbol("x-opt-sequence-number") {
		t.Errorf("order not kept: first key %v", m[0].Key)
	}
}

func TestMapKeyedConversions(t *testing.T) {
	sm := SymbolMap(map[Symbol]any{"b": 2, "a": 1})
	if diff := cmp.Diff(Map{{Key: Symbol("a"), Value: 1}, {Key: Symbol("b"), Value: 2}}, sm); diff != "" {
		t.Errorf("SymbolMap not sorted (-want +got):\n%s", diff)
	}
	got, err := sm.SymbolKeyed()
	if err != nil || len(got) != 2 || got["a"] != 1 {
		t.Errorf("SymbolKeyed = %v, %v", got, err)
	}
	if _, err := sm.StringKeyed(); !errors.Is(err, ErrMalformed) {
		t.Errorf("StringKeyed on symbol keys = %v, want ErrMalformed", err)
	}
	str := StringMap(map[string]any{"k": true})
	if m, err := str.StringKeyed(); err != nil || m["k"] != true {
		t.Errorf("StringKeyed = %v, %v", m, err)
	}
	dup := Map{{Key: "a"}, {Key: "a"}}
	if _, err := dup.StringKeyed(); !errors.Is(err, ErrMalformed) {
		t.Errorf("duplicate keys = %v, want ErrMalformed", err)
	}
	if err := str.CheckKeys(IsSymbol); !errors.Is(err, ErrMalformed) {
		t.Errorf("CheckKeys(IsSymbol) on string keys = %v", err)
	}
	if err := str.CheckKeys(IsString); err != nil {
		t.Errorf("CheckKeys(IsString) = %v", err)
	}
}

// WriteStringKeyedMap writes exactly what Marshal writes for the same
// entries as a Map, small and large (map8 and map32).
func TestWriteStringKeyedMapIsMarshalOfTheMap(t *testing.T) {
	for _, n := range []int{0, 1, 3, 40} {
		var keys []string
		var m Map
		for i := range n {
			k := fmt.Sprintf("key-%02d", i)
			keys = append(keys, k)
			m = append(m, KeyValue{Key: k, Value: int64(i) << 40})
		}
		var want, got buffer.Buffer
		if err := Marshal(&want, m); err != nil {
			t.Fatal(err)
		}
		i := 0
		if err := WriteStringKeyedMap(&got, keys, func(string) any { v := m[i].Value; i++; return v }); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%d entries: % x, want % x", n, got.Bytes(), want.Bytes())
		}
	}
}
