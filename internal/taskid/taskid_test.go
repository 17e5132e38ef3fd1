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
	sess := Scope("default", "e1", "e1-abc", "")
	gid := c.Mint(sess, "up-1", "task-42")
	if !strings.HasPrefix(gid, prefix) || strings.Contains(gid, "task-42") {
		t.Fatalf("gid %q: want an opaque sy1. id", gid)
	}
	tamper := func(s string) string { b := []byte(s); b[len(b)-2] ^= 1; return string(b) }
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
	to := func(s string) (string, bool) { return "G<" + s + ">", true }
	tests := []struct{ name, in, want string }{
		{"create task result", `{"resultType":"task","taskId":"abc","status":"working"}`,
			`{"resultType":"task","taskId":"G<abc>","status":"working"}`},
		{"spaces kept in values", `{ "taskId" : "a" , "x" : [1, 2] }`, `{"taskId":"G<a>","x":[1, 2]}`},
		{"nested only", `{"result":{"taskId":"a"}}`, `{"result":{"taskId":"a"}}`},
		{"not a string", `{"taskId":7}`, `{"taskId":7}`},
		{"no taskId", `{"content":[]}`, `{"content":[]}`},
		{"not an object", `["taskId"]`, `["taskId"]`},
		{"escaped output", `{"taskId":"q\""}`, `{"taskId":"G<q\">"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Rewrite([]byte(tt.in), to)
			if !bytes.Equal(got, []byte(tt.want)) {
				t.Fatalf("Rewrite(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
	keep := Rewrite([]byte(`{"taskId":"a"}`), func(string) (string, bool) { return "", false })
	if string(keep) != `{"taskId":"a"}` {
		t.Fatalf("declined rewrite changed the result: %s", keep)
	}
}

func TestParam(t *testing.T) {
	if id, ok := Param([]byte(`{"taskId":"x","inputResponses":{}}`)); !ok || id != "x" {
		t.Fatalf("Param = %q, %v", id, ok)
	}
	if _, ok := Param([]byte(`{"taskId":1}`)); ok {
		t.Fatal("Param took a number")
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
