package atom

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// DecodeEntry reads a create or update request body and returns its
// description: a *QueueDescription, *TopicDescription,
// *SubscriptionDescription, *RuleDescription or *NamespaceInfo. The body is
// normally an ATOM entry whose content holds the description; a bare
// description element is accepted too. Namespaces are resolved rather than
// matched by prefix, elements may come in any order, unknown elements
// (including ATOM <updated>, <title>, ...) are ignored, and missing elements
// take the defaults of [DefaultQueueDescription] and friends. Every failure
// wraps [ErrInvalidBody]. Callers should bound the body size.
func DecodeEntry(r io.Reader) (any, error) {
	d := xml.NewDecoder(r)
	root, err := nextStart(d)
	if err != nil {
		return nil, invalid("no root element: %v", err)
	}
	desc := root
	if root.Name.Local == "entry" {
		if _, err := findChild(d, "content"); err != nil {
			return nil, invalid("entry has no content element: %v", err)
		}
		if desc, err = nextStart(d); err != nil {
			return nil, invalid("content holds no description: %v", err)
		}
	}
	return decodeDescription(d, desc)
}

func decodeDescription(d *xml.Decoder, start xml.StartElement) (any, error) {
	var (
		out any
		err error
	)
	switch start.Name.Local {
	case "QueueDescription":
		var in queueXML
		if err = d.DecodeElement(&in, &start); err == nil {
			out, err = in.description()
		}
	case "TopicDescription":
		var in topicXML
		if err = d.DecodeElement(&in, &start); err == nil {
			out, err = in.description()
		}
	case "SubscriptionDescription":
		var in subscriptionXML
		if err = d.DecodeElement(&in, &start); err == nil {
			out, err = in.description()
		}
	case "RuleDescription":
		var in ruleXML
		if err = d.DecodeElement(&in, &start); err == nil {
			out, err = in.description()
		}
	case "NamespaceInfo":
		var in namespaceXML
		if err = d.DecodeElement(&in, &start); err == nil {
			out, err = in.description()
		}
	default:
		return nil, invalid("unknown description element %q", start.Name.Local)
	}
	if err != nil {
		if errors.Is(err, ErrInvalidBody) {
			return nil, err
		}
		return nil, invalid("%s: %v", start.Name.Local, err)
	}
	return out, nil
}

// nextStart returns the next start element at the current level, failing
// at the end of the enclosing element or of the input.
func nextStart(d *xml.Decoder) (xml.StartElement, error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return xml.StartElement{}, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return t, nil
		case xml.EndElement:
			return xml.StartElement{}, fmt.Errorf("element %s ended", t.Name.Local)
		}
	}
}

// findChild skips sibling elements until one named local starts.
func findChild(d *xml.Decoder, local string) (xml.StartElement, error) {
	for {
		start, err := nextStart(d)
		if err != nil {
			return xml.StartElement{}, err
		}
		if start.Name.Local == local {
			return start, nil
		}
		if err := d.Skip(); err != nil {
			return xml.StartElement{}, err
		}
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidBody}, args...)...)
}
