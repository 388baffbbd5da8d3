package emuconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

// checkKeys walks the JSON document and refuses any property the file
// format does not define, naming the line, the column and the path of
// the object that holds it. Microsoft's emulator answers such a file with
// "Out of memory"; a misspelt property silently ignored is as bad, since
// the entity then runs with a default its author did not choose.
//
// The allowed keys come from fileConfig's fields (matched without regard
// to case, as encoding/json does), so the check and the decoder cannot
// disagree. A map field (CorrelationFilter.Properties) takes any key.
//
// It returns where each property's value starts, by its path
// ("UserConfig.Namespaces[1].Limits.MaxEntities", the keys as written),
// so that a value refused later can be pointed at too (positions.at).
func checkKeys(data []byte) (positions, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := keyWalker{dec: dec, data: data, pos: positions{data: data, at: map[string]int64{}}}
	if err := w.value(reflect.TypeOf(fileConfig{}), "", true); err != nil {
		return positions{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return positions{}, w.errorf("content after the top-level object")
	}
	return w.pos, nil
}

// positions are where the values of a file's properties start.
type positions struct {
	data []byte
	at   map[string]int64 // by path
}

// errorf returns an error that names the line and column of the value
// at path (the file's start if it has none) and the path itself.
func (p positions) errorf(path, format string, args ...any) error {
	return positionError(p.data, p.at[path], path+": "+fmt.Sprintf(format, args...))
}

// keyWalker reads one token stream and checks object keys against a Go type.
type keyWalker struct {
	dec  *json.Decoder
	data []byte
	pos  positions
}

// value reads one JSON value that should decode into t. A nil t (inside a
// map of arbitrary values) accepts anything.
func (w *keyWalker) value(t reflect.Type, path string, top bool) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := w.dec.Token()
	if err != nil {
		return w.syntax(err)
	}
	switch tok {
	case json.Delim('{'):
		return w.object(t, path, top)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Slice {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(elem, fmt.Sprintf("%s[%d]", path, i), false); err != nil {
				return err
			}
		}
		_, err := w.dec.Token() // ']'
		return w.syntax(err)
	}
	return nil // a scalar: its type is the decoder's business
}

func (w *keyWalker) object(t reflect.Type, path string, top bool) error {
	for w.dec.More() {
		at := w.dec.InputOffset()
		tok, err := w.dec.Token()
		if err != nil {
			return w.syntax(err)
		}
		key, _ := tok.(string)
		var ft reflect.Type
		switch {
		case t == nil || t.Kind() == reflect.Map || t.Kind() == reflect.Interface:
			if t != nil && t.Kind() == reflect.Map {
				ft = t.Elem()
			}
		case t.Kind() == reflect.Struct:
			f, ok := fieldFor(t, key)
			switch {
			case ok:
				ft = f.Type
			case top && key == "$schema":
				// Editors and generators add it; the emulator ignores it too.
			default:
				return w.errorAt(skipSeparators(w.data, at), "unknown property %q in %s (known: %s)", key, where(path), strings.Join(fieldNames(t), ", "))
			}
		default:
			return w.errorAt(at, "%s must not be an object", where(path))
		}
		w.pos.at[join(path, key)] = skipSeparators(w.data, w.dec.InputOffset())
		if err := w.value(ft, join(path, key), false); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // '}'
	return w.syntax(err)
}

// fieldFor finds the struct field a JSON key decodes into, as
// encoding/json matches them: its tag name or its field name, preferring
// an exact match, else without regard to case.
func fieldFor(t reflect.Type, key string) (reflect.StructField, bool) {
	var fold reflect.StructField
	found := false
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := jsonName(f)
		if name == key {
			return f, true
		}
		if !found && strings.EqualFold(name, key) {
			fold, found = f, true
		}
	}
	return fold, found
}

func jsonName(f reflect.StructField) string {
	if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" {
		return tag
	}
	return f.Name
}

func fieldNames(t reflect.Type) []string {
	names := make([]string, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		names = append(names, jsonName(t.Field(i)))
	}
	sort.Strings(names)
	return names
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return "the top-level object"
	}
	return path
}

// syntax adds the line and column to a decoder's syntax error.
func (w *keyWalker) syntax(err error) error {
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return w.errorAt(se.Offset, "%s", se.Error())
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return w.errorAt(int64(len(w.data)), "the file ends before the JSON does")
	}
	return w.errorAt(w.dec.InputOffset(), "%s", err.Error())
}

func (w *keyWalker) errorf(format string, args ...any) error {
	return w.errorAt(w.dec.InputOffset(), format, args...)
}

func (w *keyWalker) errorAt(offset int64, format string, args ...any) error {
	return positionError(w.data, offset, fmt.Sprintf(format, args...))
}

// positionError says where in data offset is, as "line L, column C", the
// way editors count (from 1; a column counts bytes).
func positionError(data []byte, offset int64, msg string) error {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Errorf("emuconfig: line %d, column %d: %s", line, col, msg)
}

// skipSeparators moves offset from just past a token to the start of the
// next one.
func skipSeparators(data []byte, offset int64) int64 {
	for offset < int64(len(data)) && isSeparator(data[offset]) {
		offset++
	}
	return offset
}

// valueStart moves offset from just past a scalar JSON value back to its
// first byte (the decoder reports type errors after the value).
func valueStart(data []byte, offset int64) int64 {
	offset = min(max(offset, 0), int64(len(data)))
	if offset > 0 && data[offset-1] == '"' {
		for i := offset - 2; i >= 0; i-- {
			if data[i] == '"' && (i == 0 || data[i-1] != '\\') {
				return i
			}
		}
		return 0
	}
	for offset > 0 && !isSeparator(data[offset-1]) && data[offset-1] != '[' && data[offset-1] != '{' {
		offset--
	}
	return offset
}

// isSeparator reports JSON white space and the punctuation between tokens.
func isSeparator(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ':'
}
