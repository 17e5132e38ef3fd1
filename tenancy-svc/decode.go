package tenancy

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// decode decodes a JSON request strictly (decodeStrict); an empty body is
// the zero value. Its errors may quote field names of the request.
func decode(data []byte, v any) error {
	if err := decodeStrict(data, v); err != nil {
		return badRequest("decode request: %v", err)
	}
	return nil
}

// decodeStrict decodes data into v, refusing what encoding/json lets
// through: a field name that matches v's only case-insensitively, an
// unknown field, a name given twice, and anything after the JSON value.
// The shape is checked against v's type first, then encoding/json decodes
// the values. An empty (or blank) body leaves v as it is.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := (shapeChecker{dec}).value(reflect.TypeOf(v), ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// shapeChecker walks one JSON value along a Go type.
type shapeChecker struct{ dec *json.Decoder }

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// opaque reports whether values of t are left to encoding/json: scalars,
// interfaces, []byte (base64) and types that decode themselves.
func opaque(t reflect.Type) bool {
	switch {
	case reflect.PointerTo(t).Implements(jsonUnmarshaler), reflect.PointerTo(t).Implements(textUnmarshaler):
		return true
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
		return false
	}
	return true
}

// value checks the next JSON value against t; path names it in errors.
func (c shapeChecker) value(t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) {
		var skip json.RawMessage
		return c.dec.Decode(&skip)
	}
	tok, err := c.dec.Token()
	if err != nil || tok == nil { // a syntax error, or null
		return err
	}
	switch d, _ := tok.(json.Delim); {
	case d == '{' && t.Kind() == reflect.Struct:
		return c.object(path, func(name string) (reflect.Type, error) {
			return fieldType(t, path, name)
		})
	case d == '{' && t.Kind() == reflect.Map:
		return c.object(path, func(string) (reflect.Type, error) { return t.Elem(), nil })
	case d == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := 0; c.dec.More(); i++ {
			if err := c.value(t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, err := c.dec.Token() // ]
		return err
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		return wrongKind(path, "array")
	}
	return wrongKind(path, "object")
}

func wrongKind(path, kind string) error {
	if path == "" {
		return fmt.Errorf("want a JSON %s", kind)
	}
	return fmt.Errorf("%q: want a JSON %s", path, kind)
}

// object checks the members of an object whose '{' was read; member
// gives the type of a member by name, or refuses the name.
func (c shapeChecker) object(path string, member func(string) (reflect.Type, error)) error {
	seen := map[string]bool{}
	for c.dec.More() {
		tok, err := c.dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		if seen[name] {
			return fmt.Errorf("field %q given twice", join(path, name))
		}
		seen[name] = true
		t, err := member(name)
		if err != nil {
			return err
		}
		if err := c.value(t, join(path, name)); err != nil {
			return err
		}
	}
	_, err := c.dec.Token() // }
	return err
}

// fieldType is the type of t's field that encoding/json names name
// exactly, or an error naming the unknown field.
func fieldType(t reflect.Type, path, name string) (reflect.Type, error) {
	fields := jsonFields(t)
	if ft, ok := fields[name]; ok {
		return ft, nil
	}
	for known := range fields {
		if strings.EqualFold(known, name) {
			return nil, fmt.Errorf("unknown field %q (field names are case-sensitive: did you mean %q?)", join(path, name), join(path, known))
		}
	}
	return nil, fmt.Errorf("unknown field %q", join(path, name))
}

// jsonFields maps the JSON names of struct type t's fields, as
// encoding/json names them (tags, embedded structs), to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			for n, typ := range jsonFields(ft) {
				if _, shadowed := out[n]; !shadowed {
					out[n] = typ
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
