package atom

import (
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// KeyValue is one KeyValueOfstringanyType: a SQL parameter or a
// correlation filter property.
//
// Value holds string, bool, int32 (xs:int), int64 (xs:long and the other
// integer types), float64 (xs:double, xs:float, xs:decimal), time.Time
// (xs:dateTime), time.Duration (xs:duration) or nil (i:nil). When encoding,
// every Go integer type is accepted and written as xs:int if it fits, else
// xs:long, because the Go and JS clients only read int; float32 is written
// as xs:double.
type KeyValue struct {
	Key   string
	Value any
}

// encodeKeyValues writes <name> holding kvs; nothing when kvs is empty.
func encodeKeyValues(x *writer, name string, kvs []KeyValue) error {
	if len(kvs) == 0 {
		return nil
	}
	x.open(name)
	for _, kv := range kvs {
		typ, text, err := xsdValue(kv.Value)
		if err != nil {
			return fmt.Errorf("atom: %s %q: %w", name, kv.Key, err)
		}
		x.open("KeyValueOfstringanyType")
		x.text("Key", kv.Key)
		if typ == "" {
			x.empty("Value", "i:nil", "true")
		} else {
			// The JS client reads the literal attribute "i:type" and drops
			// the first five characters, so the XSD prefix has four.
			x.open("Value", "i:type", "d6p1:"+typ, "xmlns:d6p1", nsSchema)
			x.escaped(text)
			x.close("Value")
		}
		x.close("KeyValueOfstringanyType")
	}
	x.close(name)
	return nil
}

// xsdValue returns the XML Schema type name and text of v; "" for nil.
func xsdValue(v any) (typ, text string, err error) {
	integer := func(n int64) (string, string, error) {
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			return "int", strconv.FormatInt(n, 10), nil
		}
		return "long", strconv.FormatInt(n, 10), nil
	}
	switch v := v.(type) {
	case nil:
		return "", "", nil
	case string:
		return "string", v, nil
	case bool:
		return "boolean", strconv.FormatBool(v), nil
	case int:
		return integer(int64(v))
	case int8:
		return integer(int64(v))
	case int16:
		return integer(int64(v))
	case int32:
		return integer(int64(v))
	case int64:
		return integer(v)
	case uint8:
		return integer(int64(v))
	case uint16:
		return integer(int64(v))
	case uint32:
		return integer(int64(v))
	case uint:
		if uint64(v) > math.MaxInt64 {
			return "", "", fmt.Errorf("value %d does not fit xs:long", v)
		}
		return integer(int64(v))
	case uint64:
		if v > math.MaxInt64 {
			return "", "", fmt.Errorf("value %d does not fit xs:long", v)
		}
		return integer(int64(v))
	case float32:
		return "double", formatDouble(float64(v)), nil
	case float64:
		return "double", formatDouble(v), nil
	case time.Time:
		return "dateTime", formatTime(v), nil
	case time.Duration:
		return "duration", FormatDuration(v), nil
	default:
		return "", "", fmt.Errorf("unsupported value type %T", v)
	}
}

// formatDouble writes an xs:double: shortest exact form, INF, -INF, NaN.
func formatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "INF"
	case math.IsInf(f, -1):
		return "-INF"
	}
	return strconv.FormatFloat(f, 'G', -1, 64)
}

// keyValueXML is a KeyValueOfstringanyType as decoded.
type keyValueXML struct {
	Key   *string   `xml:"Key"`
	Value *valueXML `xml:"Value"`
}

type valueXML struct {
	typeAttr
	Text string `xml:",chardata"`
}

// typeAttr collects an element's attributes to find i:type and i:nil
// whatever prefix the sender bound to the XML Schema instance namespace.
type typeAttr struct {
	Attrs []xml.Attr `xml:",any,attr"`
}

// instanceAttr returns the value of the XSI attribute local, also accepting
// an undeclared "i" prefix.
func (t typeAttr) instanceAttr(local string) string {
	for _, a := range t.Attrs {
		if a.Name.Local == local && (a.Name.Space == nsInstance || a.Name.Space == "i") {
			return strings.TrimSpace(a.Value)
		}
	}
	return ""
}

// xsiType returns the local part of the i:type value ("d6p1:string" gives
// "string").
func (t typeAttr) xsiType() string {
	v := t.instanceAttr("type")
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		v = v[i+1:]
	}
	return v
}

func decodeKeyValues(f *fields, name string, in []keyValueXML) []KeyValue {
	if len(in) == 0 {
		return nil
	}
	out := make([]KeyValue, 0, len(in))
	for _, kv := range in {
		var o KeyValue
		f.str(&o.Key, kv.Key)
		if kv.Value != nil {
			v, err := parseXSDValue(kv.Value)
			if err != nil {
				f.fail(name+"/"+o.Key, kv.Value.Text, err)
			}
			o.Value = v
		}
		out = append(out, o)
	}
	return out
}

// parseXSDValue converts a typed Value element.
func parseXSDValue(v *valueXML) (any, error) {
	if strings.EqualFold(v.instanceAttr("nil"), "true") {
		return nil, nil
	}
	text := v.Text
	trimmed := strings.TrimSpace(text)
	switch typ := v.xsiType(); typ {
	case "string", "guid", "anyURI", "char", "":
		return text, nil
	case "boolean":
		return parseBool(trimmed)
	case "int":
		n, err := strconv.ParseInt(trimmed, 10, 64)
		if err != nil {
			return nil, err
		}
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			return int32(n), nil
		}
		return n, nil
	case "long", "short", "byte", "unsignedByte", "unsignedShort", "unsignedInt", "unsignedLong", "integer":
		return strconv.ParseInt(trimmed, 10, 64)
	case "double", "float", "decimal":
		switch trimmed {
		case "INF":
			return math.Inf(1), nil
		case "-INF":
			return math.Inf(-1), nil
		case "NaN":
			return math.NaN(), nil
		}
		return strconv.ParseFloat(trimmed, 64)
	case "dateTime":
		return parseTime(trimmed)
	case "duration":
		return ParseDuration(trimmed)
	default:
		return nil, fmt.Errorf("unsupported type %q", typ)
	}
}
