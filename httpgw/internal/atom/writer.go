package atom

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"time"
)

// XML namespaces used in the management documents.
const (
	nsAtom     = "http://www.w3.org/2005/Atom"
	nsConnect  = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
	nsInstance = "http://www.w3.org/2001/XMLSchema-instance"
	nsSchema   = "http://www.w3.org/2001/XMLSchema"
	nsCounts   = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
)

// writer emits XML with exactly the names, prefixes and order given. It
// remembers the first write error and ignores everything after it, so
// encoders can write unconditionally and check err once.
type writer struct {
	w   *bufio.Writer
	err error
}

func newWriter(w io.Writer) *writer { return &writer{w: bufio.NewWriter(w)} }

func (x *writer) raw(s string) {
	if x.err == nil {
		_, x.err = x.w.WriteString(s)
	}
}

// escaped writes s as XML character data: only &, < and > are escaped.
// Quotes stay literal (valid in text): xml.EscapeText writes them as
// numeric entities, which the JS SDK's XML parser leaves undecoded, so a
// SQL filter color = 'red' came back as color = &#39;red&#39;.
func (x *writer) escaped(s string) {
	if x.err == nil {
		_, x.err = textEscaper.WriteString(x.w, s)
	}
}

// attr writes s as a double-quoted attribute value.
func (x *writer) attr(s string) {
	if x.err == nil {
		_, x.err = attrEscaper.WriteString(x.w, s)
	}
}

var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\r", "&#xD;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "\r", "&#xD;", "\n", "&#xA;", "\t", "&#x9;")
)

// open writes a start tag; attrs are name, value pairs.
func (x *writer) open(name string, attrs ...string) {
	x.startTag(name, attrs)
	x.raw(">")
}

// empty writes a self-closing tag; attrs are name, value pairs.
func (x *writer) empty(name string, attrs ...string) {
	x.startTag(name, attrs)
	x.raw("/>")
}

func (x *writer) startTag(name string, attrs []string) {
	x.raw("<" + name)
	for i := 0; i+1 < len(attrs); i += 2 {
		x.raw(" " + attrs[i] + `="`)
		x.attr(attrs[i+1])
		x.raw(`"`)
	}
}

func (x *writer) close(name string) { x.raw("</" + name + ">") }

// text writes <name>value</name>.
func (x *writer) text(name, value string) {
	x.raw("<" + name + ">")
	x.escaped(value)
	x.close(name)
}

// optText writes <name>value</name> unless value is empty.
func (x *writer) optText(name, value string) {
	if value != "" {
		x.text(name, value)
	}
}

func (x *writer) boolean(name string, v bool) { x.text(name, strconv.FormatBool(v)) }
func (x *writer) int(name string, v int64)    { x.text(name, strconv.FormatInt(v, 10)) }

func (x *writer) duration(name string, d time.Duration) { x.text(name, FormatDuration(d)) }
func (x *writer) time(name string, t time.Time)         { x.text(name, formatTime(t)) }

// flush writes out buffered output and returns the first error.
func (x *writer) flush() error {
	if x.err == nil {
		x.err = x.w.Flush()
	}
	return x.err
}

// atomText writes <name type="text">value</name>, the ATOM text construct.
func (x *writer) atomText(name, value string) {
	x.open(name, "type", "text")
	x.escaped(value)
	x.close(name)
}
