package httpgw

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// Custom (application) property limits (rest.md §6): one property, name
// and value, and all of them together.
const (
	maxPropertyBytes      = 32 << 10
	maxAllPropertiesBytes = 64 << 10
)

// restrictedHeaders are request headers that are never custom properties
// (rest.md §2.3): HTTP's own, the gateway's, and those of proxies and
// SDK plumbing. Names are canonical (http.CanonicalHeaderKey).
var restrictedHeaders = map[string]bool{
	"Authorization": true, "Servicebusauthorization": true, "Brokerproperties": true,
	"Servicebussupplementaryauthorization": true, "Servicebusdlqsupplementaryauthorization": true,
	"Host": true, "Connection": true, "Keep-Alive": true, "Expect": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "User-Agent": true, "Date": true, "Server": true,
	"Location": true, "Cookie": true, "Set-Cookie": true, "Cache-Control": true, "Pragma": true,
	"Range": true, "Referer": true, "Origin": true, "Via": true, "Forwarded": true, "Dnt": true,
	"Traceparent": true, "Tracestate": true, "Request-Id": true, "Http2-Settings": true,
	"Max-Forwards": true, "Www-Authenticate": true, "Retry-After": true,
}

// restrictedPrefixes extend restrictedHeaders to header families.
var restrictedPrefixes = []string{"Accept", "Content-", "If-", "Proxy-", "X-Ms-", "X-Forwarded-", "Sec-", "Access-Control-"}

// isRestricted reports whether a canonical header name is never a property.
func isRestricted(name string) bool {
	if restrictedHeaders[name] {
		return true
	}
	for _, p := range restrictedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// propertiesFromHeaders collects the custom properties of a send request,
// typing each value per rest.md §2.3. Several values of one header are
// joined with commas, as HTTP allows. It returns nil when there are none.
func propertiesFromHeaders(h http.Header, strict bool) (map[string]any, error) {
	var props map[string]any
	var budget propertyBudget
	for name, values := range h {
		if isRestricted(http.CanonicalHeaderKey(name)) {
			continue
		}
		raw := strings.Join(values, ",")
		if err := budget.take(name, len(raw)); err != nil {
			return nil, err
		}
		v, err := parsePropertyValue(raw, strict)
		if err != nil {
			return nil, fmt.Errorf("custom property %q: %v", name, err)
		}
		if props == nil {
			props = make(map[string]any)
		}
		props[name] = v
	}
	return props, nil
}

// propertyBudget counts the bytes of one message's custom properties
// (name and value as sent) against the limits of rest.md §6.
type propertyBudget struct{ total int }

// take adds one property of the given name whose value takes size bytes,
// or says which limit it goes beyond.
func (b *propertyBudget) take(name string, size int) error {
	size += len(name)
	if size > maxPropertyBytes {
		return fmt.Errorf("custom property %q is %d bytes; a property may take at most %d", name, size, maxPropertyBytes)
	}
	if b.total += size; b.total > maxAllPropertiesBytes {
		return fmt.Errorf("custom properties exceed %d bytes in total", maxAllPropertiesBytes)
	}
	return nil
}

// parsePropertyValue types one custom property header value (rest.md
// §2.3, seed 000): quoted → RFC 2616 date or else string (quotes removed);
// unquoted → true/false (case-sensitive), int64, float64, and otherwise an
// error in strict mode or the string itself by default.
func parsePropertyValue(v string, strict bool) (any, error) {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		inner := v[1 : len(v)-1]
		if t, err := http.ParseTime(inner); err == nil {
			return t.UTC(), nil
		}
		return inner, nil
	}
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return i, nil
	}
	if isDecimalFloat(v) {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f, nil
		}
	}
	if strict {
		return nil, fmt.Errorf("unquoted value %q is not true, false, an integer or a number; quote strings", v)
	}
	return v, nil
}

// isDecimalFloat reports whether s looks like a decimal floating-point
// literal ([+-]digits[.digits][e[+-]digits]), excluding the hex, Inf and
// NaN forms strconv also accepts.
func isDecimalFloat(s string) bool {
	digits := false
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits = true
		case c == '.' || c == 'e' || c == 'E':
		case (c == '+' || c == '-') && (i == 0 || s[i-1] == 'e' || s[i-1] == 'E'):
		default:
			return false
		}
	}
	return digits
}

// writePropertyHeaders adds one header per application property of a
// received message, formatted as the service does: strings, ids and dates
// quoted, numbers and booleans bare (rest.md §2.3). Values REST cannot
// carry (binary, lists, maps, nil) and names that are restricted or not
// valid header names are left out.
func writePropertyHeaders(h http.Header, props map[string]any) {
	for name, v := range props {
		if !validHeaderName(name) || isRestricted(http.CanonicalHeaderKey(name)) {
			continue
		}
		s, ok := formatPropertyValue(v)
		if !ok {
			continue
		}
		h[name] = []string{s} // keep the property's own spelling
	}
}

// formatPropertyValue renders one property value for a response header.
func formatPropertyValue(v any) (string, bool) {
	quote := func(s string) string {
		return `"` + strings.NewReplacer("\r", " ", "\n", " ").Replace(s) + `"`
	}
	switch x := v.(type) {
	case string:
		return quote(x), true
	case core.Symbol:
		return quote(string(x)), true
	case core.UUID:
		return quote(x.String()), true
	case time.Time:
		return quote(formatHTTPDate(x)), true
	case bool:
		return strconv.FormatBool(x), true
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint:
		return fmt.Sprint(x), true
	case float32:
		return formatFloat(float64(x), 32)
	case float64:
		return formatFloat(x, 64)
	}
	return "", false
}

func formatFloat(f float64, bits int) (string, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	s := strconv.FormatFloat(f, 'f', -1, bits)
	if !strings.Contains(s, ".") {
		s += ".0" // keep it a double when read back
	}
	return s, true
}

// validHeaderName reports whether name is an RFC 7230 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
