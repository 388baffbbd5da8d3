package filter

import (
	"testing"
	"time"
)

func TestCorrelationFilter(t *testing.T) {
	t0 := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	m := newTestMessage(map[string]any{
		"CorrelationId":    "c-1",
		"MessageId":        "m-1",
		"To":               "to",
		"ReplyTo":          "reply",
		"Label":            "subject",
		"SessionId":        "s-1",
		"ReplyToSessionId": "rs-1",
		"ContentType":      "application/json",
	}, map[string]any{
		"version": int32(2),
		"name":    "x",
		"price":   1.5,
		"flag":    true,
		"when":    t0,
		"nothing": nil,
		"id":      [16]byte{9},
	})
	tests := []struct {
		name string
		f    CorrelationFilter
		want bool
	}{
		{"empty matches all", CorrelationFilter{}, true},
		{"correlation id", CorrelationFilter{CorrelationID: "c-1"}, true},
		{"correlation id differs", CorrelationFilter{CorrelationID: "c-2"}, false},
		{"case-sensitive", CorrelationFilter{CorrelationID: "C-1"}, false},
		{"every system field", CorrelationFilter{
			CorrelationID: "c-1", MessageID: "m-1", To: "to", ReplyTo: "reply", Subject: "subject",
			SessionID: "s-1", ReplyToSessionID: "rs-1", ContentType: "application/json",
		}, true},
		{"one system field differs", CorrelationFilter{CorrelationID: "c-1", MessageID: "m-1", ContentType: "text/plain"}, false},
		{"subject is Label", CorrelationFilter{Subject: "subject"}, true},
		{"int widths", CorrelationFilter{Properties: map[string]any{"version": int64(2)}}, true},
		{"int vs float", CorrelationFilter{Properties: map[string]any{"version": 2.0}}, true},
		{"string vs int", CorrelationFilter{Properties: map[string]any{"version": "2"}}, false},
		{"float", CorrelationFilter{Properties: map[string]any{"price": float32(1.5)}}, true},
		{"bool", CorrelationFilter{Properties: map[string]any{"flag": true}}, true},
		{"bool differs", CorrelationFilter{Properties: map[string]any{"flag": false}}, false},
		{"time", CorrelationFilter{Properties: map[string]any{"when": t0.In(time.FixedZone("x", 3600))}}, true},
		{"uuid", CorrelationFilter{Properties: map[string]any{"id": [16]byte{9}}}, true},
		{"nil matches present nil", CorrelationFilter{Properties: map[string]any{"nothing": nil}}, true},
		{"nil does not match absent", CorrelationFilter{Properties: map[string]any{"absent": nil}}, false},
		{"absent property", CorrelationFilter{Properties: map[string]any{"absent": 1}}, false},
		{"system and properties", CorrelationFilter{To: "to", Properties: map[string]any{"name": "x", "version": 2}}, true},
		{"system ok, property differs", CorrelationFilter{To: "to", Properties: map[string]any{"name": "y"}}, false},
		{"unknown type never equal", CorrelationFilter{Properties: map[string]any{"name": struct{}{}}}, false},
	}
	for _, tt := range tests {
		got, err := tt.f.Match(m)
		if err != nil {
			t.Errorf("%s: Match error %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: Match = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCorrelationFilterUnsetSystemProperty(t *testing.T) {
	f := &CorrelationFilter{SessionID: "s"}
	if ok, _ := f.Match(newTestMessage(nil, nil)); ok {
		t.Error("filter on SessionId matched a message without one")
	}
	if ok, _ := f.Match(newTestMessage(map[string]any{"SessionId": 5}, nil)); ok {
		t.Error("filter on SessionId \"s\" matched a non-string SessionId")
	}
}

func TestCorrelationFilterIsEmpty(t *testing.T) {
	if !(&CorrelationFilter{}).IsEmpty() {
		t.Error("zero CorrelationFilter is not empty")
	}
	if !(&CorrelationFilter{Properties: map[string]any{}}).IsEmpty() {
		t.Error("CorrelationFilter with an empty map is not empty")
	}
	for _, f := range []CorrelationFilter{
		{ContentType: "x"}, {ReplyToSessionID: "x"}, {Properties: map[string]any{"a": 1}},
	} {
		if f.IsEmpty() {
			t.Errorf("%+v reports empty", f)
		}
	}
}

func TestFixedFilters(t *testing.T) {
	m := newTestMessage(nil, nil)
	filters := []struct {
		f    Filter
		want bool
		sql  string
	}{
		{TrueFilter{}, true, "1=1"},
		{FalseFilter{}, false, "1=0"},
	}
	for _, tt := range filters {
		got, err := tt.f.Match(m)
		if got != tt.want || err != nil {
			t.Errorf("%T.Match = %v, %v; want %v, nil", tt.f, got, err, tt.want)
		}
		// The SQL form Service Bus reports for the filter means the same thing.
		sf, err := Compile(tt.f.(interface{ String() string }).String())
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := sf.Match(m); got != tt.want {
			t.Errorf("Compile(%q).Match = %v, want %v", tt.sql, got, tt.want)
		}
	}
}
