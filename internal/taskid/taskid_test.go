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
	if c.Mint("s", "u", "i") == c.Mint("s", "u", "i") {
		t.Fatal("two mints of one id are equal: no fresh nonce")
	}
	sess := Scope("default", "e1", "e1-abc", "")
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
	tests := []struct {
		name, scope, gid string
		codec            *Codec
		ok               bool
	}{
		{"same scope", sess, gid, c, true},
		{"other session", Scope("default", "e1", "e1-xyz", ""), gid, c, false},
		{"stateless scope", Scope("default", "e1", "", ""), gid, c, false},
		{"other key", sess, gid, other, false},
		{"tampered mac", sess, tamper(gid), c, false},
		{"upstream's own id", sess, "task-42", c, false},
		{"empty", sess, "", c, false},
		{"too many parts", sess, gid + ".x", c, false},
		{"other upstream", sess, prefix + b64.EncodeToString([]byte("up-2")) + gid[strings.LastIndexByte(gid, '.'):], c, false},
		{"truncated", sess, gid[:len(gid)-4], c, false},
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
	// Stateless scopes differ by tenant and endpoint.
	st := c.Mint(Scope("default", "", "", "up-1"), "up-1", "t")
	if _, _, ok := c.Open(Scope("default", "", "", ""), st); ok {
		t.Fatal("an id of a passthrough endpoint opened on the federated one")
	}
	if _, _, ok := c.Open(Scope("default", "e2", "", "up-1"), st); !ok {
		t.Fatal("a stateless id did not open on another edge")
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
	f.Add(c.Mint("s", "u", "id"))
	f.Add("sy1...")
	f.Add("sy1.dQ.aWQ.AAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, gid string) {
		// Never a panic; an id that opens names what its canonical mint
		// names (only a MAC under the key opens at all).
		u, id, ok := c.Open("s", gid)
		if ok {
			u2, id2, ok2 := c.Open("s", c.Mint("s", u, id))
			if !ok2 || u2 != u || id2 != id {
				t.Fatalf("Open(%q) = %q, %q; its re-mint opens as %q, %q, %v", gid, u, id, u2, id2, ok2)
			}
		}
		if up, ok := Upstream(gid); ok && up == "" {
			t.Fatalf("Upstream(%q) = \"\", true", gid)
		}
	})
}
