package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestMembers(t *testing.T) {
	tests := []struct {
		in   string
		want []string // key, value pairs as written
		obj  bool
	}{
		{`{}`, nil, true},
		{` { "a" : 1 , "b":[1,{"c":"}"}],"d":"\"{[" } `, []string{`"a"`, `1`, `"b"`, `[1,{"c":"}"}]`, `"d"`, `"\"{["`}, true},
		{`{"a":{"b":2},"a":3}`, []string{`"a"`, `{"b":2}`, `"a"`, `3`}, true},
		{`{"e":null,"f":true,"g":-1.5e3}`, []string{`"e"`, `null`, `"f"`, `true`, `"g"`, `-1.5e3`}, true},
		{`[1,2]`, nil, false},
		{`"s"`, nil, false},
	}
	for _, tc := range tests {
		var got []string
		obj := Members([]byte(tc.in), func(k, v []byte) { got = append(got, string(k), string(v)) })
		if obj != tc.obj || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Members(%s) = %v %q, want %v %q", tc.in, obj, got, tc.obj, tc.want)
		}
	}
}

func TestKeyIs(t *testing.T) {
	if !KeyIs([]byte(`"name"`), "name") || !KeyIs([]byte(`"na\u006de"`), "name") || KeyIs([]byte(`"Name"`), "name") {
		t.Fatal("KeyIs")
	}
	if Unquote([]byte(`"a\"b"`)) != `a"b` || Unquote([]byte(`"ab"`)) != "ab" {
		t.Fatal("Unquote")
	}
}

// TestMembersInvalid: input that ends inside an object, or has a member
// that does not start with a string, is reported as no object, without a
// panic (these indexed past the end of the input before).
func TestMembersInvalid(t *testing.T) {
	for _, in := range []string{`{`, ` { `, `{"a":`, `{"a":1`, `{"a":1,`, `{"a"`, `{"a":{"x":1}`, `{x}`, `{,`, `{"a":1,}`} {
		if Members([]byte(in), func(k, v []byte) {}) {
			t.Errorf("Members(%s) = true, want false", in)
		}
	}
}

// FuzzMembers: on any input Members never panics; on valid JSON it reports an object
// exactly when encoding/json decodes one, and yields the members it sees
// (the last of duplicate keys wins there).
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { "a" : 1 , "b":[1,{"c":"}"}],"d":"\"{[" } `, `{"na\u006de":"x","e":null,"f":true,"g":-1.5e3}`,
		`{"a":{"b":{"c":[[],{}]}},"a":2}`, `[1,2]`, `"s"`, `12`, `{"\\":"\\\"","k":"é\u2028"}`,
		`{"content":[{"type":"hologram","frames":[1.000000000000000001,3e400]}],"_meta":{"n":12345678901234567890}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			// Invalid input: no panic, and every member handed out lies
			// within data.
			Members(data, func(k, v []byte) {
				if len(k) < 2 || k[0] != '"' || k[len(k)-1] != '"' {
					t.Fatalf("key %q is not a quoted string", k)
				}
				_, _ = KeyIs(k, "_meta"), Unquote(k)
			})
			return
		}
		got := map[string][]byte{}
		isObject := Members(data, func(k, v []byte) {
			if !json.Valid(k) || !json.Valid(v) {
				t.Fatalf("member %q: %q is not a JSON value", k, v)
			}
			if !KeyIs(k, Unquote(k)) {
				t.Fatalf("KeyIs(%s, %q) is false", k, Unquote(k))
			}
			got[Unquote(k)] = v
		})
		var want map[string]json.RawMessage
		err := json.Unmarshal(data, &want)
		if isObject != (err == nil && want != nil) {
			t.Fatalf("object %v, encoding/json: %v %v", isObject, want, err)
		}
		if !isObject {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("members %q, want %q", got, want)
		}
		for k, v := range want {
			if !bytes.Equal(bytes.TrimSpace(got[k]), bytes.TrimSpace(v)) {
				t.Fatalf("member %q = %q, want %q", k, got[k], v)
			}
		}
	})
}
