package natsauth_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
)

var update = flag.Bool("update", false, "rewrite docs/security.md's permission table from proto.AccessTable")

const (
	docPath    = "../../docs/security.md"
	tableBegin = "<!-- BEGIN permission table: generated from proto.AccessTable; go test ./internal/natsauth -run TestSecurityDocTable -update -->\n"
	tableEnd   = "<!-- END permission table -->"
)

// TestSecurityDocTable: docs/security.md's permission table is the one the
// code computes (proto.AccessTable, default audit stream), row for row.
func TestSecurityDocTable(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated permission table between its markers", docPath)
	}
	want := natsauth.TableMarkdown(proto.AccessParams{})
	got := doc[i+len(tableBegin) : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(doc[:i+len(tableBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's permission table differs from proto.AccessTable; run go test ./internal/natsauth -run TestSecurityDocTable -update", docPath)
}
