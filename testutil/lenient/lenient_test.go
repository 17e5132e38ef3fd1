package lenient

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLenientReadsTheLastCaseVariant: the fixture runs the tool named by
// the last member that is "name" without regard to case, as encoding/json
// reads it; the go-sdk handler behind it lists the catalog.
func TestLenientReadsTheLastCaseVariant(t *testing.T) {
	s := Start(t, Catalog{Tools: []string{"allowed", "denied"}})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: s.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(lt.Tools) != 2 {
		t.Fatalf("tools %v: %v", lt, err)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed","Name":"denied"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"allowed","name":"denied"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"allowed","NAME":"denied"}}`,
	} {
		resp, err := http.Post(s.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got, want := s.Ran(), []string{"tools/call denied", "tools/call denied", "tools/call denied"}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
}
