package atom

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	withDefaultRule := fullSubscription()
	withDefaultRule.DefaultRuleDescription = correlationRule()
	withDefaultRule.DefaultRuleDescription.CreatedAt = time.Time{} // not written inside a subscription
	empty := &RuleDescription{Name: "empty"}
	emptyWant := &RuleDescription{Filter: &TrueFilter{}, Action: &EmptyRuleAction{}, Name: "empty"}

	tests := []struct {
		name     string
		in, want any
	}{
		{"queue", fullQueue(), fullQueue()},
		{"default queue", ptr(DefaultQueueDescription()), ptr(DefaultQueueDescription())},
		{"topic", fullTopic(), fullTopic()},
		{"subscription", fullSubscription(), fullSubscription()},
		{"subscription with default rule", withDefaultRule, withDefaultRule},
		{"sql rule", sqlRule(), sqlRule()},
		{"correlation rule", correlationRule(), correlationRule()},
		{"nil filter and action", empty, emptyWant},
		{"namespace", namespaceInfo(), func() *NamespaceInfo { n := namespaceInfo(); n.NamespaceType = "Messaging"; return n }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := EncodeEntry(&buf, Entry{ID: base + "x", Title: "x", Updated: updated, Content: tt.in}); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeEntry(&buf)
			if err != nil {
				t.Fatalf("DecodeEntry(%s): %v", buf.String(), err)
			}
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKeyValueTypes(t *testing.T) {
	when := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	tests := []struct {
		in   any
		typ  string
		text string
		back any
	}{
		{"s", "string", "s", "s"},
		{"", "string", "", ""},
		{true, "boolean", "true", true},
		{false, "boolean", "false", false},
		{int32(-5), "int", "-5", int32(-5)},
		{7, "int", "7", int32(7)},
		{int64(1) << 40, "long", "1099511627776", int64(1) << 40},
		{int64(math.MinInt32), "int", "-2147483648", int32(math.MinInt32)},
		{int8(1), "int", "1", int32(1)},
		{int16(2), "int", "2", int32(2)},
		{uint8(3), "int", "3", int32(3)},
		{uint16(4), "int", "4", int32(4)},
		{uint32(math.MaxUint32), "long", "4294967295", int64(math.MaxUint32)},
		{uint(5), "int", "5", int32(5)},
		{uint64(6), "int", "6", int32(6)},
		{1.5, "double", "1.5", 1.5},
		{float32(0.25), "double", "0.25", 0.25},
		{1e21, "double", "1E+21", 1e21},
		{math.Inf(1), "double", "INF", math.Inf(1)},
		{math.Inf(-1), "double", "-INF", math.Inf(-1)},
		{math.NaN(), "double", "NaN", math.NaN()},
		{when, "dateTime", "2026-01-02T02:04:05.1234567Z", when.Truncate(tick).UTC()},
		{90 * time.Second, "duration", "PT1M30S", 90 * time.Second},
		{nil, "", "", nil},
	}
	for _, tt := range tests {
		typ, text, err := xsdValue(tt.in)
		if err != nil || typ != tt.typ || text != tt.text {
			t.Errorf("xsdValue(%#v) = %q, %q, %v; want %q, %q", tt.in, typ, text, err, tt.typ, tt.text)
			continue
		}
		r := &RuleDescription{Filter: &CorrelationFilter{Properties: []KeyValue{{"k", tt.in}}}}
		var buf bytes.Buffer
		if err := EncodeEntry(&buf, Entry{Content: r}); err != nil {
			t.Fatal(err)
		}
		d, err := DecodeEntry(&buf)
		if err != nil {
			t.Fatalf("decode %v: %v", tt.in, err)
		}
		got := d.(*RuleDescription).Filter.(*CorrelationFilter).Properties[0].Value
		if diff := cmp.Diff(tt.back, got, cmpOpts...); diff != "" {
			t.Errorf("value %#v came back (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, bad := range []any{uint64(math.MaxUint64), struct{}{}, []byte("x"), complex(1, 2)} {
		r := &RuleDescription{Filter: &SQLFilter{Parameters: []KeyValue{{"k", bad}}}}
		if err := EncodeEntry(&bytes.Buffer{}, Entry{Content: r}); err == nil {
			t.Errorf("EncodeEntry with value %#v succeeded", bad)
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	var nilQueue *QueueDescription
	for _, c := range []any{nil, "text", nilQueue, &Entry{}, 42} {
		if err := EncodeEntry(&bytes.Buffer{}, Entry{Content: c}); err == nil {
			t.Errorf("EncodeEntry(content %T) succeeded", c)
		}
	}
	type otherFilter struct{ Filter }
	if err := EncodeEntry(&bytes.Buffer{}, Entry{Content: &RuleDescription{Filter: otherFilter{}}}); err == nil {
		t.Error("EncodeEntry with a foreign Filter succeeded")
	}
	if err := EncodeFeed(&bytes.Buffer{}, Feed{Entries: []Entry{{Content: 1}}}); err == nil {
		t.Error("EncodeFeed with bad content succeeded")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestEncodeWriteError(t *testing.T) {
	if err := EncodeEntry(failingWriter{}, Entry{Content: fullQueue()}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("EncodeEntry to a failing writer: %v", err)
	}
	if err := EncodeNotFoundFeed(failingWriter{}, "", time.Time{}); err == nil {
		t.Error("EncodeNotFoundFeed to a failing writer succeeded")
	}
}

// normalizeInts makes every integer value int64: an xs:long that fits an
// int is written back as xs:int on purpose, so only the value must survive.
func normalizeInts(d any) any {
	fix := func(kvs []KeyValue) {
		for i, kv := range kvs {
			if n, ok := kv.Value.(int32); ok {
				kvs[i].Value = int64(n)
			}
		}
	}
	fixRule := func(r *RuleDescription) {
		if r == nil {
			return
		}
		switch f := r.Filter.(type) {
		case *SQLFilter:
			fix(f.Parameters)
		case *CorrelationFilter:
			fix(f.Properties)
		}
		if a, ok := r.Action.(*SQLRuleAction); ok {
			fix(a.Parameters)
		}
	}
	switch d := d.(type) {
	case *RuleDescription:
		fixRule(d)
	case *SubscriptionDescription:
		fixRule(d.DefaultRuleDescription)
	}
	return d
}

// FuzzDecodeEntry checks that DecodeEntry never panics, fails only with
// ErrInvalidBody, and that whatever it accepts encodes and decodes back to
// the same description.
func FuzzDecodeEntry(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.xml"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`<RuleDescription><Filter i:type="SqlFilter"><CompatibilityLevel>0</CompatibilityLevel></Filter></RuleDescription>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := DecodeEntry(bytes.NewReader(body))
		if err != nil {
			if !errors.Is(err, ErrInvalidBody) {
				t.Fatalf("error %v does not wrap ErrInvalidBody", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := EncodeEntry(&buf, Entry{ID: "https://h/x", Title: "x", Content: d}); err != nil {
			t.Fatalf("EncodeEntry of decoded %#v: %v", d, err)
		}
		again, err := DecodeEntry(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("DecodeEntry of re-encoded %s: %v", buf.Bytes(), err)
		}
		if diff := cmp.Diff(normalizeInts(d), normalizeInts(again), cmpOpts...); diff != "" {
			t.Fatalf("round trip changed the description (-first +second):\n%s\nencoded: %s", diff, buf.Bytes())
		}
	})
}
