package proto

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func FuzzUnmarshalRequest(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.msgpack"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Request
		if err := Unmarshal(data, &r); err != nil {
			return
		}
		again, err := Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		var r2 Request
		if err := Unmarshal(again, &r2); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("decode-encode-decode differs: %+v vs %+v", r, r2)
		}
		var rep Reply
		_ = Unmarshal(data, &rep)
	})
}

func FuzzRouteTokens(f *testing.F) {
	f.Add("switchyard.v1.route.default.tools_call")
	f.Add("switchyard.v1.route..x")
	f.Fuzz(func(t *testing.T, s string) {
		ten, op, ok := RouteTokens(s)
		if !ok {
			return
		}
		b, err := AppendRouteSubject(nil, ten, op)
		if err != nil || string(b) != s {
			t.Fatalf("RouteTokens(%q) = %q %q, rebuilt %q (%v)", s, ten, op, b, err)
		}
	})
}
