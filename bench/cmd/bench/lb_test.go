package main

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRoundRobin: requests alternate between the backends, whatever they
// carry, and the client's Host goes through.
func TestRoundRobin(t *testing.T) {
	var hits [2]atomic.Int32
	var hosts []string
	for i := range 2 {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			_, _ = io.WriteString(w, r.Host)
		}))
		defer s.Close()
		hosts = append(hosts, strings.TrimPrefix(s.URL, "http://"))
	}
	lb := httptest.NewServer(roundRobin(hosts, log.New(io.Discard, "", 0)))
	defer lb.Close()
	for range 6 {
		req, _ := http.NewRequest(http.MethodPost, lb.URL+"/mcp", strings.NewReader("{}"))
		req.Header.Set("Mcp-Session-Id", "same-session")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != strings.TrimPrefix(lb.URL, "http://") {
			t.Fatalf("backend saw Host %q", b)
		}
	}
	if hits[0].Load() != 3 || hits[1].Load() != 3 {
		t.Fatalf("hits %d/%d, want 3/3", hits[0].Load(), hits[1].Load())
	}
}
