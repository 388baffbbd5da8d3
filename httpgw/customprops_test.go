package httpgw

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/omnibusmq/omnibus/core"
)

func TestParsePropertyValue(t *testing.T) {
	date := time.Date(2011, 3, 4, 8, 49, 37, 0, time.UTC)
	cases := []struct {
		in     string
		want   any
		strict bool // also valid in strict mode
	}{
		{`"High"`, "High", true},
		{`"12345,ABC"`, "12345,ABC", true},
		{`""`, "", true},
		{`"Fri, 04 Mar 2011 08:49:37 GMT"`, date, true},
		{`"true"`, "true", true},
		{"true", true, true},
		{"false", false, true},
		{"True", "True", false}, // booleans are case-sensitive
		{"42", int64(42), true},
		{"-7", int64(-7), true},
		{"299.98", 299.98, true},
		{"1e3", 1000.0, true},
		{"9223372036854775808", 9223372036854775808.0, true}, // too big for int64: a double
		{"NaN", "NaN", false},
		{"Inf", "Inf", false},
		{"0x10", "0x10", false},
		{"Windows 7 Ultimate", "Windows 7 Ultimate", false},
		{"Fri, 04 Mar 2011 08:49:37 GMT", "Fri, 04 Mar 2011 08:49:37 GMT", false}, // unquoted date stays text
	}
	for _, c := range cases {
		got, err := parsePropertyValue(c.in, false)
		if err != nil || !cmp.Equal(got, c.want) {
			t.Errorf("lenient %q: got %#v, %v; want %#v", c.in, got, err, c.want)
		}
		got, err = parsePropertyValue(c.in, true)
		if c.strict && (err != nil || !cmp.Equal(got, c.want)) {
			t.Errorf("strict %q: got %#v, %v; want %#v", c.in, got, err, c.want)
		}
		if !c.strict && err == nil {
			t.Errorf("strict %q: accepted as %#v", c.in, got)
		}
	}
}

func TestPropertiesFromHeadersSkipsRestricted(t *testing.T) {
	h := http.Header{}
	for _, k := range []string{"Authorization", "Content-Type", "Content-Length", "Host", "Expect", "Connection",
		"Transfer-Encoding", "Accept", "Accept-Encoding", "User-Agent", "BrokerProperties", "X-Ms-Version",
		"ServiceBusAuthorization", "Traceparent", "If-Match", "X-Forwarded-For"} {
		h.Set(k, "1")
	}
	h.Set("Customer", `"abc"`)
	h.Add("Multi", "1")
	h.Add("Multi", "2")
	got, err := propertiesFromHeaders(h, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"Customer": "abc", "Multi": "1,2"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got, err := propertiesFromHeaders(http.Header{"Host": {"x"}}, true); err != nil || got != nil {
		t.Errorf("no properties: %v %v", got, err)
	}
	big := http.Header{}
	for i := 0; i < 3; i++ {
		big.Set(strings.Repeat("p", i+1), strings.Repeat("v", 30<<10))
	}
	if _, err := propertiesFromHeaders(big, false); err == nil || !strings.Contains(err.Error(), "in total") {
		t.Errorf("64 KiB total not enforced: %v", err)
	}
}

func TestWritePropertyHeaders(t *testing.T) {
	u := core.NewUUID()
	props := map[string]any{
		"Priority": "High", "order-time": time.Date(2011, 3, 4, 8, 49, 37, 0, time.UTC), "N": int64(5),
		"U8": uint8(3), "F": 2.0, "F32": float32(1.5), "Ok": true, "Id": u, "Sym": core.Symbol("s"),
		"Bin": []byte{1}, "Nil": nil, "List": []any{1}, "bad name": "x", "Content-Type": "nope",
		"Multi\nLine": "x", "Line": "a\r\nb",
	}
	h := http.Header{}
	writePropertyHeaders(h, props)
	want := http.Header{
		"Priority": {`"High"`}, "order-time": {`"Fri, 04 Mar 2011 08:49:37 GMT"`}, "N": {"5"}, "U8": {"3"},
		"F": {"2.0"}, "F32": {"1.5"}, "Ok": {"true"}, "Id": {`"` + u.String() + `"`}, "Sym": {`"s"`}, "Line": {`"a  b"`},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// What is written reads back as the same value.
	for name, v := range h {
		back, err := parsePropertyValue(v[0], true)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if name == "N" && back != int64(5) || name == "F" && back != 2.0 || name == "Ok" && back != true {
			t.Errorf("%s read back as %#v", name, back)
		}
	}
}
