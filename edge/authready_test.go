package edge

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// TestEdgeAuthBeforeTenancyLoaded: before its tenancy snapshot is
// loaded, the edge answers 503 with Retry-After and no Bearer challenge
// (a 401 would send an OAuth client into a login flow), with a
// credential or without.
func TestEdgeAuthBeforeTenancyLoaded(t *testing.T) {
	s := natstest.Start(t) // not provisioned: the tenancy watcher never loads
	e, err := New(Config{ID: "edge-t", Listen: "127.0.0.1:0", CallTimeout: time.Second}, natstest.Connect(t, s), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range []string{"", "Bearer sy_whatever"} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		_, fail := e.authenticate(r, e.tenancy.Current())
		if fail == nil || fail.status != http.StatusServiceUnavailable {
			t.Fatalf("Authorization %q: %+v, want 503", auth, fail)
		}
		w := httptest.NewRecorder()
		e.writeAuthFailure(w, r, fail)
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || w.Header().Get("WWW-Authenticate") != "" {
			t.Fatalf("answer %d, headers %v", w.Code, w.Header())
		}
	}
}
