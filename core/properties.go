package core

import (
	"fmt"
	"strings"
)

// Application properties kept as they arrived.
//
// A front may hand the broker a message's application properties in its
// own wire encoding ([Message.EncodedProperties]) instead of decoded: the
// broker stores those bytes as they are (body record version 2,
// record.go) and the front delivers them as they are, so a message whose
// properties nothing in the broker reads is never decoded into a map nor
// encoded again. What does read them (a subscription's filter or rule
// action, dead-lettering, a settlement that modifies them, the REST
// gateway, the console, [Broker.Check]) decodes them on demand through
// the [PropertyCodec] the front registered for its encoding. Core itself
// knows no wire encoding.

// A PropertyCodec decodes application properties that a front keeps in
// its own encoding. DecodeProperties returns them in core's form (see
// [Message]), or nil for none; it must accept whatever the front put in
// EncodedProperties.Bytes, and fail on anything else without panicking
// (a damaged record reaches it too).
type PropertyCodec interface {
	DecodeProperties(b []byte) (map[string]any, error)
}

// propertyCodecs are the registered codecs by id. They are written only
// by RegisterPropertyCodec, from package initialisation, and read after.
var propertyCodecs [256]PropertyCodec

// RegisterPropertyCodec makes c the decoder of EncodedProperties with
// codec id (1–255). Like image.RegisterFormat it is meant for a front's
// init function: a body record names the codec of its properties, and
// any broker in the process must be able to read it (after a restart, in
// `omnibus check`, on another node of a cluster). An id is stored in
// records and must never change meaning; registering one twice panics.
func RegisterPropertyCodec(id byte, c PropertyCodec) {
	if id == 0 || c == nil {
		panic("core: RegisterPropertyCodec with id 0 or a nil codec")
	}
	if propertyCodecs[id] != nil {
		panic(fmt.Sprintf("core: property codec %d registered twice", id))
	}
	propertyCodecs[id] = c
}

// EncodedProperties are a message's application properties in the wire
// encoding of the front that received them. The zero value holds none.
type EncodedProperties struct {
	// Codec is the id of the registered [PropertyCodec] that decodes Bytes.
	Codec byte
	// Bytes is the encoding, as received; the broker never changes it.
	Bytes []byte
	// Size is what the properties count towards [Message.Size]: the
	// lengths of their keys, plus for each value the length of a string,
	// symbol or binary and 8 for any other scalar, as [Message.Size]
	// counts decoded ones.
	Size int
}

// decode decodes e with its codec.
func (e *EncodedProperties) decode() (map[string]any, error) {
	c := propertyCodecs[e.Codec]
	if c == nil {
		return nil, fmt.Errorf("%w: application properties in an unknown encoding %d", errCorrupt, e.Codec)
	}
	props, err := c.DecodeProperties(e.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: application properties: %v", errCorrupt, err)
	}
	return props, nil
}

// encoded reports whether m's application properties are encoded.
func (m *Message) encoded() bool { return m.EncodedProperties.Bytes != nil }

// Properties returns m's application properties in core's form. Decoded
// ones are m's own map, which the caller must not change; encoded ones
// are decoded into a new map on every call, leaving m as it is (a
// message the broker keeps may be read by several goroutines at once).
func (m *Message) Properties() (map[string]any, error) {
	if !m.encoded() {
		return m.ApplicationProperties, nil
	}
	return m.EncodedProperties.decode()
}

// ownProperties decodes m's encoded application properties into
// m.ApplicationProperties, so that they can be changed. m must be the
// caller's alone (a copy, or a message read for the change).
func (m *Message) ownProperties() error {
	if !m.encoded() {
		return nil
	}
	props, err := m.EncodedProperties.decode()
	if err != nil {
		return err
	}
	m.ApplicationProperties, m.EncodedProperties = props, EncodedProperties{}
	return nil
}

// setProperty sets application property k of m, which must be the
// caller's alone, decoding encoded properties first.
func (m *Message) setProperty(k string, v any) error {
	if err := m.ownProperties(); err != nil {
		return err
	}
	if m.ApplicationProperties == nil {
		m.ApplicationProperties = make(map[string]any, 2)
	}
	m.ApplicationProperties[k] = v
	return nil
}

// propertyIn returns the property named name from props: an exact match,
// else one whose name matches case-insensitively (filtermsg.go).
func propertyIn(props map[string]any, name string) (any, bool) {
	if v, ok := props[name]; ok {
		return v, true
	}
	for k, v := range props {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}
