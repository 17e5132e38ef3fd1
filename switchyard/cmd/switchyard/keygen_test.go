package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
)

func TestKeygen(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		var out, errb bytes.Buffer
		if code := runKeygen(nil, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		key := strings.TrimSuffix(out.String(), "\n")
		if _, _, ok := apikey.Parse(key); !ok || strings.Contains(key, "\n") {
			t.Fatalf("output %q is not one Switchyard API key", out.String())
		}
		if seen[key] {
			t.Fatal("the same key twice")
		}
		seen[key] = true
		if errb.Len() != 0 {
			t.Errorf("stderr: %q", errb.String())
		}
	}
	for _, args := range [][]string{{"extra"}, {"--bits", "128"}} {
		var out, errb bytes.Buffer
		if code := runKeygen(args, &out, &errb); code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "usage: switchyard keygen") {
			t.Errorf("keygen %q: exit %d, stdout %q, stderr %q; want 2 and the usage", args, code, out.String(), errb.String())
		}
	}
}
