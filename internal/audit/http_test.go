package audit

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAuditHTTP(t *testing.T) {
	h := startHarness(t, Config{})
	t0 := time.Now().UTC()
	for i := range 40 {
		ev := genEvent(i, t0)
		h.pub.Record(&ev)
	}
	h.waitPublished(t, 40)
	mux := http.NewServeMux()
	mux.Handle("/audit/", NewHandler(h.s, nil))
	missing, _ := NewSearcher(h.nc, "NO_SUCH_STREAM")
	mux.Handle("/missing/", http.StripPrefix("/missing", NewHandler(missing, nil)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	get := func(path string) (int, map[string]json.RawMessage) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: content type %q", path, ct)
		}
		var body map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode, body
	}

	var seen []uint64
	cursor := ""
	for {
		code, body := get("/audit/events?tenant=acme&limit=5&since=1h" + cursor)
		if code != http.StatusOK {
			t.Fatalf("status %d: %s", code, body["error"])
		}
		var events []Hit
		if err := json.Unmarshal(body["events"], &events); err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.Tenant != "acme" || e.Method == "" || e.Time.IsZero() {
				t.Fatalf("event %+v", e)
			}
			seen = append(seen, e.Seq)
		}
		next, ok := body["next_cursor"]
		if !ok {
			break
		}
		cursor = "&cursor=" + string(next)
	}
	if len(seen) != 14 { // i%3 == 0 for i < 40
		t.Fatalf("paged through %d acme events, want 14", len(seen))
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] >= seen[i-1] {
			t.Fatalf("not newest first: %v", seen)
		}
	}

	for path, want := range map[string]int{
		"/audit/events?limit=0":           http.StatusBadRequest,
		"/audit/events?limit=x":           http.StatusBadRequest,
		"/audit/events?tennant=acme":      http.StatusBadRequest,
		"/audit/events?since=yesterday":   http.StatusBadRequest,
		"/audit/events?tenant=a&tenant=b": http.StatusBadRequest,
		"/audit/events?tool=a&name=b":     http.StatusBadRequest,
		"/audit/events?since=1m&until=2h": http.StatusBadRequest,
		"/audit/other":                    http.StatusNotFound,
		"/missing/events":                 http.StatusServiceUnavailable,
		"/audit/events?outcome=-32602&tool=" + url.QueryEscape("files_tool_4"): http.StatusOK,
	} {
		if code, body := get(path); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body["error"], want)
		}
	}
	resp, err := http.Post(srv.URL+"/audit/events", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestAuditParseQuery(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := url.Values{"tenant": {"acme"}, "principal": {"alice"}, "upstream": {"files"}, "tool": {"read"},
		"method": {"tools/call"}, "outcome": {"error"}, "since": {"90m"}, "until": {"2026-01-02T03:00:00Z"},
		"limit": {"7"}, "cursor": {strconv.Itoa(99)}}
	q, err := ParseQuery(v, now)
	if err != nil {
		t.Fatal(err)
	}
	want := Query{Tenant: "acme", Principal: "alice", Upstream: "files", Tool: "read", Method: "tools/call",
		Outcome: OutcomeError, Since: now.Add(-90 * time.Minute), Until: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), Limit: 7, Cursor: 99}
	if q != want {
		t.Fatalf("ParseQuery = %+v, want %+v", q, want)
	}
}

// TestAuditParseQueryRefuses: the queries whose meaning would be a guess
// are refused, with an ErrBadQuery naming the problem.
func TestAuditParseQueryRefuses(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		query, want string
	}{
		{"tool=a&name=b", "tool and name given"},
		{"tool=a&name=a", "tool and name given"},
		{"name=a&name=b", "name given 2 times"},
		{"tool=a&tool=a", "tool given 2 times"},
		{"tenant=a&tenant=b", "tenant given 2 times"},
		{"tennant=a", `unknown parameter "tennant"`},
		{"limit=0", "limit: want 1..1000"},
	} {
		v, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseQuery(v, now)
		if !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseQuery(%s) = %v, want ErrBadQuery with %q", tc.query, err, tc.want)
		}
	}
	for _, query := range []string{"tool=a", "name=a"} {
		v, _ := url.ParseQuery(query)
		if q, err := ParseQuery(v, now); err != nil || q.Tool != "a" {
			t.Errorf("ParseQuery(%s) = %+v, %v, want tool a", query, q, err)
		}
	}
}
