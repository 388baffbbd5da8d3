package atom

import (
	"fmt"
	"io"
	"strconv"
	"time"
)

// Content types of management responses.
const (
	ContentTypeEntry = "application/atom+xml;type=entry;charset=utf-8"
	ContentTypeFeed  = "application/atom+xml;type=feed;charset=utf-8"
	ContentTypeError = "application/xml; charset=utf-8"
)

// NotFoundFeedTitle is the title of the empty feed Service Bus returns,
// with status 200, for a GET of a top-level path where nothing exists. The
// Go client compares the title with this exact text.
const NotFoundFeedTitle = "Publicly Listed Services"

// Entry is an ATOM entry carrying one description.
type Entry struct {
	// ID is the entity's absolute URL, e.g.
	// "https://localhost:5300/q1?api-version=2021-05". It is also written as
	// the self link. The JS client takes entity names from its path.
	ID string
	// Title is the entity name (queue path, subscription or rule name).
	// The Go client takes names from it.
	Title string
	// Published is when the entity was created; zero means Updated.
	Published time.Time
	// Updated is when the entity last changed.
	Updated time.Time
	// Author is the namespace name; omitted when empty.
	Author string
	// Content is a *QueueDescription, *TopicDescription,
	// *SubscriptionDescription, *RuleDescription or *NamespaceInfo (or the
	// same types as values).
	Content any
}

// Feed is an ATOM feed listing entities.
type Feed struct {
	// ID is the collection's absolute URL; also written as the self link.
	ID string
	// Title is "Queues", "Topics", "Subscriptions" or "Rules".
	Title   string
	Updated time.Time
	// Next, when set, is the absolute URL of the next page ($skip=N),
	// written as a rel="next" link; the JS client pages only with it.
	Next    string
	Entries []Entry
}

// EncodeEntry writes e as a stand-alone entry document:
//
//	<entry xmlns="http://www.w3.org/2005/Atom"><id>…</id><title type="text">…</title>
//	<published/><updated/><author><name>…</name></author><link rel="self" href="…"/>
//	<content type="application/xml"><QueueDescription …>…</QueueDescription></content></entry>
//
// (without the line breaks). It fails only for unsupported content or
// value types, and write errors.
func EncodeEntry(w io.Writer, e Entry) error {
	x := newWriter(w)
	if err := encodeEntry(x, e, true); err != nil {
		return err
	}
	return x.flush()
}

// EncodeFeed writes f with its entries, in the shape of the recorded
// service responses.
func EncodeFeed(w io.Writer, f Feed) error {
	x := newWriter(w)
	x.open("feed", "xmlns", nsAtom)
	x.atomText("title", f.Title)
	x.text("id", f.ID)
	x.text("updated", formatEntryTime(f.Updated))
	x.empty("link", "rel", "self", "href", f.ID)
	if f.Next != "" {
		x.empty("link", "rel", "next", "href", f.Next)
	}
	for _, e := range f.Entries {
		if err := encodeEntry(x, e, false); err != nil {
			return err
		}
	}
	x.close("feed")
	return x.flush()
}

// EncodeNotFoundFeed writes the empty "Publicly Listed Services" feed that
// tells the Go and .NET clients a top-level entity does not exist (sent
// with status 200, rest.md §4.2). id is written as the feed id; "" gives
// "uuid:00000000-0000-0000-0000-000000000000;id=1".
func EncodeNotFoundFeed(w io.Writer, id string, updated time.Time) error {
	if id == "" {
		id = "uuid:00000000-0000-0000-0000-000000000000;id=1"
	}
	x := newWriter(w)
	x.open("feed", "xmlns", nsAtom)
	x.atomText("title", NotFoundFeedTitle)
	x.open("subtitle", "type", "text")
	x.escaped("This is the list of publicly-listed services currently available.")
	x.close("subtitle")
	x.text("id", id)
	x.text("updated", formatEntryTime(updated))
	x.text("generator", "Service Bus 1.1")
	x.close("feed")
	return x.flush()
}

// EncodeError writes the error body of management and runtime failures:
// <Error><Code>code</Code><Detail>detail</Detail></Error>.
func EncodeError(w io.Writer, code int, detail string) error {
	x := newWriter(w)
	x.open("Error")
	x.text("Code", strconv.Itoa(code))
	x.text("Detail", detail)
	x.close("Error")
	return x.flush()
}

func encodeEntry(x *writer, e Entry, top bool) error {
	if top {
		x.open("entry", "xmlns", nsAtom)
	} else {
		x.open("entry")
	}
	x.text("id", e.ID)
	x.atomText("title", e.Title)
	published := e.Published
	if published.IsZero() {
		published = e.Updated
	}
	x.text("published", formatEntryTime(published))
	x.text("updated", formatEntryTime(e.Updated))
	if e.Author != "" {
		x.open("author")
		x.text("name", e.Author)
		x.close("author")
	}
	x.empty("link", "rel", "self", "href", e.ID)
	x.open("content", "type", "application/xml")
	if err := encodeContent(x, e.Content); err != nil {
		return err
	}
	x.close("content")
	x.close("entry")
	return nil
}

func encodeContent(x *writer, content any) error {
	switch c := content.(type) {
	case QueueDescription:
		content = &c
	case TopicDescription:
		content = &c
	case SubscriptionDescription:
		content = &c
	case RuleDescription:
		content = &c
	case NamespaceInfo:
		content = &c
	}
	switch c := content.(type) {
	case *QueueDescription:
		if c != nil {
			c.encode(x)
			return nil
		}
	case *TopicDescription:
		if c != nil {
			c.encode(x)
			return nil
		}
	case *SubscriptionDescription:
		if c != nil {
			return c.encode(x)
		}
	case *RuleDescription:
		if c != nil {
			return c.encode(x)
		}
	case *NamespaceInfo:
		if c != nil {
			c.encode(x)
			return nil
		}
	}
	return fmt.Errorf("atom: unsupported entry content %T", content)
}
