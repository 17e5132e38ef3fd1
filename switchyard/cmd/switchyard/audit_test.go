package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// startAudit stores n events (tenants acme/globex alternating, tool
// read_<i%3>, the secret-looking argument recorded for acme) and returns
// the server's URL.
func startAudit(t *testing.T, n int) string {
	t.Helper()
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	js, _ := jetstream.New(nc)
	// tenancy-svc provisions the stream in a deployment.
	if _, err := audit.EnsureStream(t.Context(), js, audit.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	pub, err := audit.NewPublisher(nc, audit.Config{
		Tenants: map[string]audit.TenantPolicy{"acme": {RecordArguments: true}},
		Redact:  []string{"arguments.password"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- pub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	t0 := time.Now()
	for i := range n {
		tenant := "acme"
		if i%2 == 1 {
			tenant = "globex"
		}
		pub.Record(&audit.Event{
			Time: t0.Add(time.Duration(i) * time.Millisecond), Tenant: tenant, Principal: "alice",
			Method: "tools/call", Upstream: "files", Name: "read_" + strconv.Itoa(i%3), Outcome: audit.OutcomeOK,
			Duration: time.Millisecond, TraceID: strings.Repeat("a", 31) + strconv.Itoa(i%10),
			Arguments: json.RawMessage(`{"path":"/x","password":"hunter2"}`),
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for pub.Published() < uint64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("published %d of %d events", pub.Published(), n)
		}
		select {
		case <-t.Context().Done():
			t.Fatal("test ended")
		case <-time.After(5 * time.Millisecond):
		}
	}
	return s.ClientURL()
}

func runAuditCLI(args ...string) cliResult {
	var out, errb bytes.Buffer
	code := runAudit(args, &out, &errb)
	return cliResult{code, out.String(), errb.String()}
}

func TestAuditCLISearch(t *testing.T) {
	url := startAudit(t, 30)

	r := runAuditCLI("search", "--nats", url, "--tenant", "acme", "--tool", "read_1", "--limit", "3")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SEQ") {
		t.Fatalf("want a header and 3 rows:\n%s", r.stdout)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, "acme") || !strings.Contains(l, "read_1") {
			t.Errorf("row %q does not match the filters", l)
		}
	}
	if !strings.Contains(r.stderr, "older: --cursor ") {
		t.Fatalf("stderr %q: want the next cursor", r.stderr)
	}
	next := strings.TrimSpace(r.stderr[strings.LastIndex(r.stderr, " ")+1:])

	// The next page continues older, and the JSON form carries the same.
	r = runAuditCLI("search", "--nats", url, "--tenant", "acme", "--tool", "read_1", "--limit", "3", "--cursor", next, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var page audit.Page
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r.stdout)
	}
	cur, _ := strconv.ParseUint(next, 10, 64)
	if len(page.Events) != 2 { // 5 of the 30 events are acme with read_1
		t.Fatalf("second page has %d events, want 2", len(page.Events))
	}
	for _, h := range page.Events {
		if h.Seq >= cur || h.Tenant != "acme" || h.Name != "read_1" {
			t.Errorf("second page event %+v (cursor %d)", h, cur)
		}
		var args map[string]string
		if err := json.Unmarshal(h.Arguments, &args); err != nil || args["password"] != audit.Redacted || args["path"] != "/x" {
			t.Errorf("arguments %s: want the password redacted, the path kept", h.Arguments)
		}
	}
	if page.Next != 0 {
		t.Errorf("last page has next cursor %d", page.Next)
	}
}

func TestAuditCLIUsage(t *testing.T) {
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "usage"},
		{[]string{"--help"}, 0, ""},
		{[]string{"find"}, 2, "unknown command"},
		{[]string{"search", "--limit", "0"}, 2, "--limit"},
		{[]string{"search", "--since", "yesterday"}, 2, "--since"},
		{[]string{"search", "--cursor", "x"}, 2, "--cursor"},
		{[]string{"search", "extra"}, 2, "unexpected argument"},
		{[]string{"search", "--nats", "nats://127.0.0.1:1", "--timeout", "500ms"}, 1, "connect"},
	}
	for _, tc := range cases {
		r := runAuditCLI(tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.msg) {
			t.Errorf("%q: exit %d, output %q; want %d and %q", tc.args, r.code, r.stdout+r.stderr, tc.code, tc.msg)
		}
	}
}

// TestAuditCLITableEscapes: values a client chose (name, method,
// principal) reach the table with control and invisible characters
// escaped, so they can neither drive the operator's terminal nor forge
// rows or columns; the JSON output keeps them as they are.
func TestAuditCLITableEscapes(t *testing.T) {
	hostile := audit.Hit{Seq: 7, Event: audit.Event{
		Time: time.Unix(0, 0), Tenant: "acme", Outcome: audit.OutcomeOK,
		Principal: "eve\x1b]0;pwned\x07",
		Method:    "tools/call\r\n8\t2026-01-01\tacme\tadmin",
		Name:      "read\x1b[2J\u202eexe.txt\u0085\x7f\xff\\x1b",
		TraceID:   "caf\u00e9 ok",
	}}
	var out, errb bytes.Buffer
	printAuditPage(&out, &errb, &audit.Page{Events: []audit.Hit{hostile}})
	got := out.String()
	if lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n"); len(lines) != 2 {
		t.Fatalf("want a header and one row, got %d lines:\n%s", len(lines), got)
	}
	for i, r := range strings.TrimSuffix(got, "\n") {
		if r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == 0x202e || r == utf8.RuneError) {
			t.Errorf("byte %d: %U reached the table:\n%q", i, r, got)
		}
	}
	for _, want := range []string{
		`eve\x1b]0;pwned\x07`,
		`tools/call\x0d\x0a8\x092026-01-01\x09acme\x09admin`,
		`read\x1b[2J\u202eexe.txt\u0085\x7f\xff\\x1b`,
		"caf\u00e9 ok",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %s:\n%s", want, got)
		}
	}
	for in, want := range map[string]string{"": "", "plain name/ok": "plain name/ok", "a\\b": `a\\b`, "\U000e0001": `\U000e0001`} {
		if s := termSafe(in); s != want {
			t.Errorf("termSafe(%q) = %s, want %s", in, s, want)
		}
	}
}

func TestAuditCountEvents(t *testing.T) {
	for n, want := range map[int]string{0: "0 events", 1: "1 event", 2: "2 events", 50: "50 events"} {
		if got := countEvents(n); got != want {
			t.Errorf("countEvents(%d) = %q, want %q", n, got, want)
		}
	}
}
