package proto

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// matches reports whether subject matches a NATS wildcard pattern.
func matches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, t := range p {
		if t == ">" {
			return len(s) > i
		}
		if i >= len(s) || (t != "*" && t != s[i]) {
			return false
		}
	}
	return len(p) == len(s)
}

func TestProtoSubjectsMatchWildcards(t *testing.T) {
	route, _ := AppendRouteSubject(nil, "default", OpToolsCall)
	worker, _ := AppendWorkerSubject(nil, "w-1", OpCancel)
	pool, _ := AppendPoolSubject(nil, "everything", OpCatalog)
	workerAll, _ := WorkerSubjectAll("w-1")
	poolAll, _ := PoolSubjectAll("everything")
	hb, _ := EvtWorkerSubject("w-1")
	tc, _ := EvtListChangedSubject("default")
	sc, _ := EvtSessionClosedSubject("edge-1")
	tests := []struct{ pattern, subject string }{
		{SubjRouteAll, string(route)},
		{workerAll, string(worker)},
		{poolAll, string(pool)},
		{SubjEvtWorkerAll, hb},
		{SubjEvtListChangedAll, tc},
		{SubjEvtSessionClosedAll, sc},
	}
	for _, tc := range tests {
		if !matches(tc.pattern, tc.subject) {
			t.Errorf("%q does not match %q", tc.subject, tc.pattern)
		}
		if tc.subject != strings.ToLower(tc.subject) || !strings.HasPrefix(tc.subject, Prefix) {
			t.Errorf("%q: not lowercase or not versioned", tc.subject)
		}
	}
	if ten, op, ok := RouteTokens(string(route)); !ok || ten != "default" || op != OpToolsCall {
		t.Fatalf("RouteTokens(%q) = %q %q %v", route, ten, op, ok)
	}
}

func TestProtoSubjectBuildersRejectBadTokens(t *testing.T) {
	for _, tok := range []string{"", "a.b", "a*", ">", "a b", "a\tb", "\x00"} {
		if _, err := AppendRouteSubject(nil, tok, "op"); !errors.Is(err, ErrBadToken) {
			t.Errorf("tenant %q accepted", tok)
		}
		if _, err := AppendWorkerSubject(nil, "w", tok); !errors.Is(err, ErrBadToken) {
			t.Errorf("op %q accepted", tok)
		}
	}
}

func TestProtoSlugs(t *testing.T) {
	for s, want := range map[string]bool{"a": true, "everything-http": true, "a1-b2": true,
		"": false, "-a": false, "a-": false, "A": false, "a_b": false, "a.b": false, strings.Repeat("a", 64): false} {
		if ValidSlug(s) != want {
			t.Errorf("ValidSlug(%q) = %v", s, !want)
		}
	}
}

func TestProtoCodesUniqueAndReserved(t *testing.T) {
	sdk := map[int32]bool{-32042: true}
	for c := int32(-32005); c <= -32001; c++ {
		sdk[c] = true
	}
	for c := int32(-32022); c <= -32020; c++ {
		sdk[c] = true
	}
	seen := map[int32]bool{}
	for _, c := range GatewayCodes {
		if seen[c] {
			t.Errorf("code %d used twice", c)
		}
		seen[c] = true
		if c < -32069 || c > -32060 || sdk[c] {
			t.Errorf("code %d outside the reserved block or used by the SDK", c)
		}
	}
	wrapped := errors.Join(errors.New("ctx"), Errorf(CodeNoWorkers, "no worker serves upstream x"))
	if !errors.Is(wrapped, ErrNoWorkers) || errors.Is(wrapped, ErrTimeout) {
		t.Fatal("errors.Is by code broken")
	}
}

// golden messages: one per type, to catch wire changes. Reply has three:
// reply and reply_error without Upstream and ServiceNs (as a router, or a
// worker before those fields, sends them) and reply_served with them (a
// worker's answer to a call it ran).
var golden = map[string]any{
	"request": &Request{Method: "tools/call", Tenant: "default", Edge: "edge-1", Session: "edge-1-abc",
		Upstream: "everything", Name: "echo", Protocol: "2025-11-25", Params: []byte(`{"name":"everything__echo","arguments":{"text":"hi"}}`),
		ID: 42, DeadlineUnixMs: 1_800_000_000_000},
	"reply":          &Reply{Result: []byte(`{"content":[]}`), Worker: "w-1"},
	"reply_error":    &Reply{Error: &Error{Code: CodeNoWorkers, Msg: "no worker serves upstream x", Data: []byte(`{"upstream":"x"}`)}},
	"reply_served":   &Reply{Result: []byte(`{"content":[]}`), Worker: "w-1", Upstream: "everything", ServiceNs: 1_234_567},
	"cancel":         &Cancel{Edge: "edge-1", ID: 42},
	"heartbeat":      &Heartbeat{Worker: "w-1", Boot: 1, IntervalMs: 500, InFlight: 3, Upstreams: []UpstreamState{{Name: "a", Up: true}, {Name: "b", Err: "refused"}}},
	"upstream_spec":  &UpstreamSpec{Name: "fs", Transport: TransportStdio, Command: []string{"fs-server", "--root", "/"}, Env: map[string]string{"B": "2", "A": "1"}, Processes: 2},
	"listset":        &ListSet{Upstream: "a", Kind: KindTools, Items: [][]byte{[]byte(`{"name":"x"}`)}, Hash: 7},
	"session_closed": &SessionClosed{Edge: "edge-1", Session: "edge-1-abc"},
	"list_changed":   &ListChanged{Tenant: "default", Kind: KindTools, Upstreams: []string{"a", "b"}},
}

func TestProtoGolden(t *testing.T) {
	for name, msg := range golden {
		t.Run(name, func(t *testing.T) {
			data, err := Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".msgpack")
			if *update {
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(data, want) {
				t.Fatalf("wire encoding of %s changed; bump the subject version or run -update", name)
			}
			back := reflect.New(reflect.TypeOf(msg).Elem()).Interface()
			if err := Unmarshal(want, back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, msg) {
				t.Fatalf("round trip: got %+v want %+v", back, msg)
			}
		})
	}
}

func TestProtoUnmarshalGarbage(t *testing.T) {
	for _, in := range [][]byte{nil, {0xc1}, []byte("not msgpack"), {0xdf, 0xff, 0xff, 0xff, 0xff}} {
		var r Request
		if err := Unmarshal(in, &r); err == nil && len(in) > 0 {
			t.Errorf("%x decoded without error", in)
		}
	}
}

func BenchmarkProtoRequestRoundTrip(b *testing.B) {
	req := golden["request"].(*Request)
	b.ReportAllocs()
	var out Request
	for b.Loop() {
		data, _ := AppendMarshal(nil, req)
		_ = Unmarshal(data, &out)
	}
}

func BenchmarkProtoRouteSubject(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendRouteSubject(buf[:0], "default", OpToolsCall)
	}
}

// envelopeFixtures returns the hot-path messages: a tools/call Request as a
// router forwards it (315-byte params) and its Reply as the worker sends it
// (1 KiB result, with the upstream and the worker's time on the call).
func envelopeFixtures() (*Request, *Reply) {
	params := []byte(`{"name":"filesystem__read_text_file","arguments":{"path":"/srv/projects/switchyard/docs/architecture/overview.md","head":200},"_meta":{"progressToken":"c0ffee-42"}}`)
	for len(params) < 315 { // pad the arguments to exactly 315 bytes
		params = append(params[:len(params)-1], ` `...)
		params = append(params, '}')
	}
	result := make([]byte, 0, 1024)
	result = append(result, `{"content":[{"type":"text","text":"`...)
	for len(result) < 1024-4 {
		result = append(result, "lorem ipsum "[len(result)%12])
	}
	result = append(result, `"}]}`...)
	req := &Request{Method: "tools/call", Tenant: "default", Edge: "edge-7f3a9c", Session: "edge-7f3a9c-5b1d2e8f4a6c",
		Upstream: "filesystem", Name: "read_text_file", Protocol: "2025-11-25", Params: params,
		ID: 1_048_613, DeadlineUnixMs: 1_800_000_030_123}
	rep := &Reply{Result: result[:1024], Worker: "w-3c9e1a", Upstream: "filesystem", ServiceNs: 2_345_678}
	return req, rep
}

func BenchmarkProtoEnvelope(b *testing.B) {
	req, rep := envelopeFixtures()
	if len(req.Params) != 315 || len(rep.Result) != 1024 {
		b.Fatalf("fixture sizes %d %d", len(req.Params), len(rep.Result))
	}
	run := func(b *testing.B, in any, reset func() any, payload []byte, strs string) {
		data, err := Marshal(in)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("op=encode", func(b *testing.B) {
			buf := make([]byte, 0, 2*len(data))
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = AppendMarshal(buf[:0], in)
			}
		})
		b.Run("op=decode", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Unmarshal(data, reset()); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The floor on this machine: just the allocations a decode cannot
		// avoid (the payload copy and one block for the non-interned strings).
		b.Run("op=alloc-floor", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				benchSinkBytes = append([]byte(nil), payload...)
				var sb strings.Builder
				sb.Grow(len(strs))
				sb.WriteString(strs)
				benchSinkString = sb.String()
			}
		})
		b.Run("op=roundtrip", func(b *testing.B) {
			buf := make([]byte, 0, 2*len(data))
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = AppendMarshal(buf[:0], in)
				if err := Unmarshal(buf, reset()); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The hot path's decode (UnmarshalView): no copies. The buffer is
		// reused here only because nothing decoded outlives the iteration.
		b.Run("op=decode-view", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := UnmarshalView(data, reset()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("op=roundtrip-view", func(b *testing.B) {
			buf := make([]byte, 0, 2*len(data))
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = AppendMarshal(buf[:0], in)
				if err := UnmarshalView(buf, reset()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Decode targets are reused (reset to zero), as a hot loop would.
	var outReq Request
	var outRep Reply
	b.Run("msg=request", func(b *testing.B) {
		run(b, req, func() any { outReq = Request{}; return &outReq },
			req.Params, req.Edge+req.Session+req.Upstream+req.Name)
	})
	b.Run("msg=reply", func(b *testing.B) {
		run(b, rep, func() any { outRep = Reply{}; return &outRep }, rep.Result, rep.Worker+rep.Upstream)
	})
}

var (
	benchSinkBytes  []byte
	benchSinkString string
)

// TestForwardsClientAuth: the client's Authorization travels with its
// calls for passthrough and for token exchange, and for nothing else.
func TestForwardsClientAuth(t *testing.T) {
	for _, tc := range []struct {
		a    *UpstreamAuth
		want bool
	}{
		{nil, false},
		{&UpstreamAuth{BearerEnv: "T"}, false},
		{&UpstreamAuth{Passthrough: true}, true},
		{&UpstreamAuth{TokenExchange: &TokenExchange{TokenURL: "https://idp/token", ClientID: "w"}}, true},
	} {
		if got := tc.a.ForwardsClientAuth(); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.a, got, tc.want)
		}
	}
}
