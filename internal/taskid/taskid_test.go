package taskid

import (
	"bytes"
	"strings"
	"testing"
)

func testCodec(t *testing.T, key string) *Codec {
	t.Helper()
	c, err := New([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMintOpen(t *testing.T) {
	c := testCodec(t, "0123456789abcdef0123456789abcdef")
	other := testCodec(t, "fedcba9876543210fedcba9876543210")
	if c.Mint(Scope{}, "u", "i") == c.Mint(Scope{}, "u", "i") {
		t.Fatal("two mints of one id are equal: no fresh nonce")
	}
	sess := Scope{Tenant: "default", Principal: "alice", Edge: "e1", Session: "e1-abc"}
	gid := c.Mint(sess, "up-1", "task-42")
	if !strings.HasPrefix(gid, prefix) || strings.Contains(gid, "task-42") || strings.Contains(gid, b64.EncodeToString([]byte("task-42"))) {
		t.Fatalf("gid %q: want an opaque sy1. id", gid)
	}
	// tamper changes the second-to-last character of the sealed part
	// (all six bits are tag bits) to another base64url digit, so the id
	// still decodes and only the GCM tag check can refuse it. (Flipping
	// the low ASCII bit turned 'A', 'Z', 'a', 'z', '-' and '_' into
	// non-digits, about 1 run in 11, and tested the decoding instead.)
	tamper := func(s string) string {
		b := []byte(s)
		if b[len(b)-2] == 'A' {
			b[len(b)-2] = 'B'
		} else {
			b[len(b)-2] = 'A'
		}
		return string(b)
	}
	if _, _, ok := split(tamper(gid)); !ok || tamper(gid) == gid {
		t.Fatalf("tampered id %q does not decode or is the id: the case would not reach the tag check", tamper(gid))
	}
	with := func(f func(*Scope)) Scope { s := sess; f(&s); return s }
	tests := []struct {
		name, gid string
		scope     Scope
		codec     *Codec
		ok        bool
	}{
		{"same scope", gid, sess, c, true},
		{"another view of the session", gid, with(func(s *Scope) { s.View = "up-1" }), c, true},
		{"other session", gid, with(func(s *Scope) { s.Session = "e1-xyz" }), c, false},
		{"other edge", gid, with(func(s *Scope) { s.Edge = "e2" }), c, false},
		{"other principal", gid, with(func(s *Scope) { s.Principal = "bob" }), c, false},
		{"anonymous", gid, with(func(s *Scope) { s.Principal = "" }), c, false},
		{"same sub, a JWT's", gid, with(func(s *Scope) { s.Issuer = "https://idp/" }), c, false},
		{"other tenant", gid, with(func(s *Scope) { s.Tenant = "acme" }), c, false},
		{"stateless scope", gid, with(func(s *Scope) { s.Edge, s.Session = "", "" }), c, false},
		{"other key", gid, sess, other, false},
		{"tampered mac", tamper(gid), sess, c, false},
		{"upstream's own id", "task-42", sess, c, false},
		{"empty", "", sess, c, false},
		{"too many parts", gid + ".x", sess, c, false},
		{"other upstream", prefix + b64.EncodeToString([]byte("up-2")) + gid[strings.LastIndexByte(gid, '.'):], sess, c, false},
		{"truncated", gid[:len(gid)-4], sess, c, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, id, ok := tt.codec.Open(tt.scope, tt.gid)
			if ok != tt.ok {
				t.Fatalf("Open ok = %v, want %v", ok, tt.ok)
			}
			if ok && (u != "up-1" || id != "task-42") {
				t.Fatalf("Open = %q, %q", u, id)
			}
		})
	}
	if u, ok := Upstream(gid); !ok || u != "up-1" {
		t.Fatalf("Upstream = %q, %v", u, ok)
	}
}

// TestScopeStateless: a stateless (2026-07-28) task is its caller's on
// its endpoint, from any edge: other endpoints, other principals of the
// tenant, an issuer's principal of the same sub, and other tenants do not
// open it.
func TestScopeStateless(t *testing.T) {
	c := testCodec(t, "0123456789abcdef0123456789abcdef")
	alice := Scope{Tenant: "default", Principal: "alice", View: "up-1"}
	jwt := Scope{Tenant: "default", Issuer: "https://idp/", Principal: "alice", View: "up-1"}
	ids := map[string]string{"alice": c.Mint(alice, "up-1", "t"), "jwt": c.Mint(jwt, "up-1", "t")}
	tests := []struct {
		name, id string
		scope    Scope
		ok       bool
	}{
		{"its caller", "alice", alice, true},
		{"its caller on another edge", "alice", Scope{Tenant: "default", Principal: "alice", Edge: "e2", View: "up-1"}, true},
		{"the federated endpoint", "alice", Scope{Tenant: "default", Principal: "alice"}, false},
		{"another principal", "alice", Scope{Tenant: "default", Principal: "bob", View: "up-1"}, false},
		{"anonymous", "alice", Scope{Tenant: "default", View: "up-1"}, false},
		{"another tenant", "alice", Scope{Tenant: "acme", Principal: "alice", View: "up-1"}, false},
		{"a JWT of the same sub", "alice", jwt, false},
		{"the JWT's caller", "jwt", jwt, true},
		{"another issuer", "jwt", Scope{Tenant: "default", Issuer: "https://other/", Principal: "alice", View: "up-1"}, false},
		{"the API key of the sub", "jwt", alice, false},
		// Fields are length-prefixed: moving bytes from the issuer to the
		// principal is another scope.
		{"issuer and principal shifted", "jwt", Scope{Tenant: "default", Issuer: "https://idp", Principal: "/alice", View: "up-1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, ok := c.Open(tt.scope, ids[tt.id]); ok != tt.ok {
				t.Fatalf("Open ok = %v, want %v", ok, tt.ok)
			}
		})
	}
}

// TestOpenLegacy: ids minted before scopes named the caller ("s" + edge +
// session, "t" + tenant + view) still open from their client session,
// whose edge admits only the caller that created it; a stateless one,
// which named no caller, never opens.
func TestOpenLegacy(t *testing.T) {
	c := testCodec(t, "0123456789abcdef0123456789abcdef")
	session := c.seal("s\x00e1\x00e1-abc", "up-1", "task-7")
	stateless := c.seal("t\x00default\x00up-1", "up-1", "task-8")
	if u, id, ok := c.Open(Scope{Tenant: "default", Principal: "alice", Edge: "e1", Session: "e1-abc"}, session); !ok || u != "up-1" || id != "task-7" {
		t.Fatalf("a legacy session id from its session: %q %q %v", u, id, ok)
	}
	if _, _, ok := c.Open(Scope{Tenant: "default", Principal: "alice", Edge: "e1", Session: "e1-xyz"}, session); ok {
		t.Fatal("a legacy session id opened from another session")
	}
	for _, s := range []Scope{{Tenant: "default", View: "up-1"}, {Tenant: "default", Principal: "alice", View: "up-1"}} {
		if _, _, ok := c.Open(s, stateless); ok {
			t.Fatalf("a legacy stateless id opened for %+v", s)
		}
	}
}

func TestNewShortKey(t *testing.T) {
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("New accepted a 5-byte key")
	}
}

func TestRewrite(t *testing.T) {
	to := func(s string) string { return "G<" + s + ">" }
	tests := []struct {
		name, in, want string
		nested         bool
		err            error
	}{
		{"create task result", `{"resultType":"task","taskId":"abc","status":"working"}`,
			`{"resultType":"task","taskId":"G<abc>","status":"working"}`, true, nil},
		{"spaces kept in values", `{ "taskId" : "a" , "x" : [1, 2] }`, `{"taskId":"G<a>","x":[1, 2]}`, false, nil},
		{"2025-11-25 shape", `{"task":{"taskId":"a","status":"working"}}`, `{"task":{"taskId":"G<a>","status":"working"}}`, true, nil},
		{"nested, not asked", `{"task":{"taskId":"a"}}`, `{"task":{"taskId":"a"}}`, false, nil},
		{"deeper is content", `{"result":{"taskId":"a"}}`, `{"result":{"taskId":"a"}}`, true, nil},
		{"repeated", `{"taskId":"a","taskId":"b"}`, `{"taskId":"G<a>","taskId":"G<b>"}`, false, nil},
		{"not a string", `{"taskId":7}`, ``, false, ErrMalformed},
		{"nested not a string", `{"task":{"taskId":null}}`, ``, true, ErrMalformed},
		{"no taskId", `{"content":[]}`, `{"content":[]}`, true, nil},
		{"not an object", `["taskId"]`, `["taskId"]`, true, nil},
		{"escaped output", `{"taskId":"q\""}`, `{"taskId":"G<q\">"}`, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Rewrite([]byte(tt.in), to, tt.nested)
			if err != tt.err || err == nil && !bytes.Equal(got, []byte(tt.want)) {
				t.Fatalf("Rewrite(%s) = %s, %v; want %s, %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestParam(t *testing.T) {
	tests := []struct {
		in, id string
		ok     bool
	}{
		{`{"taskId":"x","inputResponses":{}}`, "x", true},
		{`{"taskId":1}`, "", false},
		{`{}`, "", false},
		{`{"taskId":"x","TaskId":"y"}`, "", false}, // a case-insensitive decoder upstream takes the second
		{`{"TASKID":"y","taskId":"x"}`, "", false},
		{`{"taskId":"x","taskId":"y"}`, "", false},
		{`{"taskI\u0064":"x"}`, "x", true}, // an escaped key is the same key
	}
	for _, tt := range tests {
		if id, ok := Param([]byte(tt.in)); ok != tt.ok || id != tt.id && ok {
			t.Errorf("Param(%s) = %q, %v; want %q, %v", tt.in, id, ok, tt.id, tt.ok)
		}
	}
}

func FuzzOpen(f *testing.F) {
	c, _ := New([]byte("0123456789abcdef0123456789abcdef"))
	s := Scope{Tenant: "t", Principal: "p", Edge: "e", Session: "s"}
	f.Add(c.Mint(s, "u", "id"))
	f.Add("sy1...")
	f.Add("sy1.dQ.aWQ.AAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, gid string) {
		// Never a panic; an id that opens names what its canonical mint
		// names (only a MAC under the key opens at all).
		u, id, ok := c.Open(s, gid)
		if ok {
			u2, id2, ok2 := c.Open(s, c.Mint(s, u, id))
			if !ok2 || u2 != u || id2 != id {
				t.Fatalf("Open(%q) = %q, %q; its re-mint opens as %q, %q, %v", gid, u, id, u2, id2, ok2)
			}
		}
		if up, ok := Upstream(gid); ok && up == "" {
			t.Fatalf("Upstream(%q) = \"\", true", gid)
		}
	})
}

// TestCodecRekey: after a new key, ids mint under it, and ids of the key
// before still open; ids of the key before that do not.
func TestCodecRekey(t *testing.T) {
	k1, k2, k3 := make([]byte, KeyLen), make([]byte, KeyLen), make([]byte, KeyLen)
	k2[0], k3[0] = 2, 3
	c, err := New(k1)
	if err != nil {
		t.Fatal(err)
	}
	sc := Scope{Tenant: "t"}
	old := c.Mint(sc, "up", "task-1")
	if err := c.Rekey(k2); err != nil {
		t.Fatal(err)
	}
	fresh := c.Mint(sc, "up", "task-2")
	for _, id := range []string{old, fresh} {
		if _, tid, ok := c.Open(sc, id); !ok || (tid != "task-1" && tid != "task-2") {
			t.Fatalf("open %s: %q %v", id, tid, ok)
		}
	}
	only2, _ := New(k2)
	if _, _, ok := only2.Open(sc, fresh); !ok {
		t.Fatal("an id minted after the rekey does not open under the new key alone")
	}
	if err := c.Rekey(k3); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.Open(sc, old); ok {
		t.Fatal("an id two keys old still opens")
	}
	if err := c.Rekey([]byte("short")); err == nil {
		t.Fatal("a short key accepted")
	}
}
