// Package jsonbody reads the JSON bodies of fencegate's REST API as their
// members are documented: one value, nothing after it, each object's
// members spelled exactly as the Go type's json names (or, for a map, any
// names) and none twice.
//
// encoding/json alone matches a member to a field without regard to case,
// by Unicode's simple folding, so that "TTL", "Ttl" and "\u017fession"
// (a long s) are taken for "ttl" and "session"; and of two members of one
// name it keeps the last. A proxy, a log or an audit that reads the body
// by its exact names would then see another request than the gateway
// serves. Here such a body is refused.
package jsonbody

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Decode decodes data, one JSON value, into v, a pointer. Beyond
// json.Unmarshal, it refuses members that the type does not have
// (spelled exactly), members that appear twice in an object, and
// anything after the value. Values that decode themselves
// (json.Unmarshaler) are checked for repeated members only.
func Decode(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return errors.New("jsonbody: Decode needs a pointer")
	}
	check := json.NewDecoder(bytes.NewReader(data))
	check.UseNumber() // numbers are left to the decode below, which knows their types
	if err := members(check, t, "", 0); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}

// maxDepth bounds how deeply a body's arrays and objects may nest: the
// API's bodies nest three deep, and json.Decoder's tokens, which members
// reads, have no bound of their own (a 2 MiB body of "[" would recurse
// two million times).
const maxDepth = 32

// members reads one value from dec and checks its objects' members
// against t, the type it will be decoded into (nil: any), depth arrays
// and objects down. A value whose JSON kind t does not take is left to
// json.Decoder to refuse.
func members(dec *json.Decoder, t reflect.Type, at string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	t = plain(t)
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		var elem reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			fields = fieldsOf(t)
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			name := tok.(string)
			if seen[name] {
				return fmt.Errorf("member %q twice", at+name)
			}
			seen[name] = true
			next := elem
			if fields != nil {
				ft, ok := fields[name]
				if !ok {
					return fmt.Errorf("unknown member %q (members are spelled as documented, in lower case)", at+name)
				}
				next = ft
			}
			if err := members(dec, next, at+name+".", depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := members(dec, elem, fmt.Sprintf("%s%d.", at, i), depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

var (
	unmarshaler     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// plain returns the type t's JSON is decoded into, without pointers, or
// nil when any members will do: t is nil, an interface, or a type that
// decodes itself.
func plain(t reflect.Type) reflect.Type {
	for t != nil {
		if reflect.PointerTo(t).Implements(unmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
			return nil
		}
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return t
		}
	}
	return nil
}

// fieldsOf returns the members of struct t by their exact json names,
// with the types they decode into; the fields of an embedded struct
// without a name of its own are t's, as encoding/json has them.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			inner := f.Type
			if inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				for n, ft := range fieldsOf(inner) {
					if _, ok := fields[n]; !ok {
						fields[n] = ft
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}
