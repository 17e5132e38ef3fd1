package proto

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func FuzzUnmarshalRequest(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.msgpack"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	fuzzSeeds(f, func(w *altWriter) { altRequest(w, randRequest(w.rng)) })
	f.Fuzz(func(t *testing.T, data []byte) {
		// The hand-written decoder never panics, fails exactly when the
		// reflection decoder fails, and otherwise decodes the same value.
		v, err := checkSameDecoding(t, data, &Request{})
		_, _ = checkSameDecoding(t, data, &Reply{})
		if err != nil {
			return
		}
		r := v.(*Request)
		// Its re-encoding is the reflection encoding, and decodes the same.
		again := checkSameEncoding(t, r)
		var r2 Request
		if err := Unmarshal(again, &r2); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sentRequest(r), &r2) {
			t.Fatalf("decode-encode-decode differs: %+v vs %+v", r, &r2)
		}
	})
}

func FuzzRouteTokens(f *testing.F) {
	f.Add("switchyard.v1.route.default.tools_call")
	f.Add("switchyard.v1.route..x")
	f.Add("switchyard.v1.router.r1.default.tools_call")
	f.Fuzz(func(t *testing.T, s string) {
		ten, op, ok := RouteTokens(s)
		if !ok {
			return
		}
		// Both forms decode: switchyard.v1.route.<tenant>.<op> and the
		// per-router switchyard.v1.router.<router>.<tenant>.<op>.
		var b []byte
		var err error
		if router, isDirect := strings.CutPrefix(s, Prefix+"router."); isDirect {
			router, _, _ = strings.Cut(router, ".")
			b, err = AppendRouterRouteSubject(nil, router, ten, op)
		} else {
			b, err = AppendRouteSubject(nil, ten, op)
		}
		if err != nil || string(b) != s {
			t.Fatalf("RouteTokens(%q) = %q %q, rebuilt %q (%v)", s, ten, op, b, err)
		}
	})
}
