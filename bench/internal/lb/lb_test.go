package lb

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func get(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader("{}"))
	req.Header.Set("Mcp-Session-Id", "same-session")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

// backends starts n backends answering their index and the Host they saw;
// ready[i] false makes backend i's /readyz answer 503.
func backends(t *testing.T, n int, ready []*atomic.Bool) (hosts []string, hits []*atomic.Int32) {
	for i := range n {
		var h atomic.Int32
		hits = append(hits, &h)
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/readyz" {
				if ready != nil && !ready[i].Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
				return
			}
			h.Add(1)
			_, _ = io.WriteString(w, r.Host)
		}))
		t.Cleanup(s.Close)
		hosts = append(hosts, strings.TrimPrefix(s.URL, "http://"))
	}
	return hosts, hits
}

// TestRoundRobin: requests alternate between the backends, whatever they
// carry, and the client's Host goes through.
func TestRoundRobin(t *testing.T) {
	hosts, hits := backends(t, 2, nil)
	lb := httptest.NewServer(New(hosts, log.New(io.Discard, "", 0)))
	defer lb.Close()
	for range 6 {
		if got := get(t, lb.URL); got != strings.TrimPrefix(lb.URL, "http://") {
			t.Fatalf("backend saw Host %q", got)
		}
	}
	if hits[0].Load() != 3 || hits[1].Load() != 3 {
		t.Fatalf("hits %d/%d, want 3/3", hits[0].Load(), hits[1].Load())
	}
}

// TestSkipsRefusingBackend: a backend that refuses connections costs no
// request: each goes to the other backend.
func TestSkipsRefusingBackend(t *testing.T) {
	hosts, hits := backends(t, 1, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	lb := httptest.NewServer(New([]string{dead, hosts[0]}, log.New(io.Discard, "", 0)))
	defer lb.Close()
	for range 6 {
		get(t, lb.URL)
	}
	if hits[0].Load() != 6 {
		t.Fatalf("live backend got %d of 6", hits[0].Load())
	}
}

// TestSkipsUnreadyBackend: a backend whose /readyz is not 200 gets no new
// requests once checked, and gets them again once ready.
func TestSkipsUnreadyBackend(t *testing.T) {
	ready := []*atomic.Bool{new(atomic.Bool), new(atomic.Bool)}
	ready[1].Store(true)
	hosts, hits := backends(t, 2, ready)
	b := New(hosts, log.New(io.Discard, "", 0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Run(ctx)
	lb := httptest.NewServer(b)
	defer lb.Close()
	deadline := time.Now().Add(5 * time.Second)
	for b.backends[0].ready.Load() {
		if time.Now().After(deadline) {
			t.Fatal("backend 0 never checked unready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 6 {
		get(t, lb.URL)
	}
	if hits[0].Load() != 0 {
		t.Fatalf("unready backend got %d requests", hits[0].Load())
	}
	ready[0].Store(true)
	for !b.backends[0].ready.Load() {
		if time.Now().After(deadline) {
			t.Fatal("backend 0 never checked ready again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 6 {
		get(t, lb.URL)
	}
	if hits[0].Load() == 0 {
		t.Fatal("ready backend got no request")
	}
}
