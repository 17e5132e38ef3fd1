package audit

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

const searchTestEvents = 5000

// searchFixture is a harness holding searchTestEvents events, event i at
// stream sequence i+1.
type searchFixture struct {
	*harness
	events []Event
}

func newSearchFixture(t *testing.T) *searchFixture {
	t.Helper()
	h := startHarness(t, Config{})
	t0 := time.Now().Add(-time.Second).UTC()
	f := &searchFixture{harness: h}
	for i := range searchTestEvents {
		ev := genEvent(i, t0)
		f.events = append(f.events, ev)
		h.pub.enqueueWait(&ev)
	}
	h.waitPublished(t, searchTestEvents)
	return f
}

// expect returns the sequences of the events matching q, newest first,
// by brute force.
func (f *searchFixture) expect(q Query) []uint64 {
	var out []uint64
	for i := len(f.events) - 1; i >= 0; i-- {
		ev := &f.events[i]
		switch {
		case q.Tenant != "" && ev.Tenant != q.Tenant,
			q.Principal != "" && ev.Principal != q.Principal,
			q.Upstream != "" && ev.Upstream != q.Upstream,
			q.Tool != "" && ev.Name != q.Tool,
			q.Method != "" && ev.Method != q.Method,
			q.Outcome == OutcomeError && ev.Outcome == OutcomeOK,
			q.Outcome != "" && q.Outcome != OutcomeError && ev.Outcome != q.Outcome,
			!q.Since.IsZero() && ev.Time.Before(q.Since),
			!q.Until.IsZero() && ev.Time.After(q.Until):
			continue
		}
		out = append(out, uint64(i+1))
	}
	return out
}

// all pages through q and returns every hit's sequence, checking each
// hit's event against the one recorded.
func (f *searchFixture) all(t *testing.T, q Query) []uint64 {
	t.Helper()
	var seqs []uint64
	for pages := 0; ; pages++ {
		if pages > searchTestEvents {
			t.Fatal("pagination does not end")
		}
		p, err := f.s.Search(t.Context(), q)
		if err != nil {
			t.Fatalf("Search(%+v): %v", q, err)
		}
		for _, h := range p.Events {
			want := f.events[h.Seq-1]
			if reflect.DeepEqual(want, h.Event) {
				seqs = append(seqs, h.Seq)
				continue
			}
			if diff := cmp.Diff(want, h.Event, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
				t.Fatalf("event at seq %d differs from the one recorded (-want +got):\n%s", h.Seq, diff)
			}
			seqs = append(seqs, h.Seq)
		}
		if p.Next == 0 {
			return seqs
		}
		if len(p.Events) > 0 && p.Next > p.Events[len(p.Events)-1].Seq {
			t.Fatalf("next cursor %d above the page's last sequence %d", p.Next, p.Events[len(p.Events)-1].Seq)
		}
		q.Cursor = p.Next
	}
}

func TestAuditSearchByField(t *testing.T) {
	f := newSearchFixture(t)
	mid := f.events[searchTestEvents/2].Time
	cases := []struct {
		name string
		q    Query
	}{
		{"all", Query{}},
		{"tenant", Query{Tenant: "globex"}},
		{"principal", Query{Principal: "carol"}},
		{"upstream", Query{Upstream: "db"}},
		{"tool", Query{Tool: "search_tool_7"}},
		{"method", Query{Method: "tools/list"}},
		{"outcome ok", Query{Outcome: OutcomeOK}},
		{"outcome code", Query{Outcome: "-32602"}},
		{"outcome tool_error", Query{Outcome: OutcomeToolError}},
		{"outcome any error", Query{Outcome: OutcomeError}},
		{"tenant and tool", Query{Tenant: "acme", Tool: "files_tool_3"}},
		{"tenant upstream outcome", Query{Tenant: "initech", Upstream: "search", Outcome: "-32060"}},
		{"tenant principal", Query{Tenant: "acme", Principal: "erin"}},
		{"since", Query{Since: mid}},
		{"until", Query{Until: mid}},
		{"range and tenant", Query{Tenant: "acme", Since: f.events[1000].Time, Until: f.events[1200].Time}},
		{"nothing", Query{Tenant: "acme", Tool: "no_such_tool"}},
		{"unknown tenant", Query{Tenant: "umbrella"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := f.expect(tc.q)
			// The first page is the newest.
			p, err := f.s.Search(t.Context(), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			first := want[:min(len(want), DefaultLimit)]
			var got []uint64
			for _, h := range p.Events {
				got = append(got, h.Seq)
			}
			if diff := cmp.Diff(first, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("first page (-want +got):\n%s", diff)
			}
			// Every page, newest first, adds up to all matches.
			for _, limit := range []int{1000, 137} {
				q := tc.q
				q.Limit = limit
				if len(want) > 20*limit {
					continue // paging 5000 one by one adds time, not coverage
				}
				all := f.all(t, q)
				if diff := cmp.Diff(want, all, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("limit %d, all pages (-want +got):\n%s", limit, diff)
				}
			}
		})
	}
}

func TestAuditSearchPaginationNewestFirst(t *testing.T) {
	f := newSearchFixture(t)
	q := Query{Tenant: "acme", Limit: 50}
	seqs := f.all(t, q)
	if !slices.IsSortedFunc(seqs, func(a, b uint64) int { return int(b) - int(a) }) {
		t.Fatal("pages not newest first")
	}
	if want := f.expect(q); !slices.Equal(seqs, want) {
		t.Fatalf("got %d events over the pages, want %d", len(seqs), len(want))
	}
	// A cursor at the oldest event ends the search.
	p, err := f.s.Search(t.Context(), Query{Cursor: 1})
	if err != nil || len(p.Events) != 0 || p.Next != 0 {
		t.Fatalf("cursor 1: %+v, %v; want an empty last page", p, err)
	}
}

// TestAuditSearchBoundedScan checks a search that reaches MaxScan
// returns what it has with a cursor that goes on, that the server sends
// it about that many events, not the rest of the stream, and that
// following the cursors still finds everything.
func TestAuditSearchBoundedScan(t *testing.T) {
	f := newSearchFixture(t)
	f.s.MaxScan = 500
	q := Query{Tenant: "acme", Principal: "alice", Limit: 1000}
	want := f.expect(q)
	// A searcher of its own connection, whose every message is the search's.
	nc := natstest.Connect(t, f.srv)
	s, err := NewSearcher(nc, "")
	if err != nil {
		t.Fatal(err)
	}
	s.MaxScan = f.s.MaxScan
	p, err := s.Search(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if p.Next == 0 || len(p.Events) >= len(want) {
		t.Fatalf("first page has %d of %d events, next %d: want a partial page with a cursor", len(p.Events), len(want), p.Next)
	}
	// Batches sized for windows the budget had not yet clamped sent
	// 6,650 messages for this page.
	if got := nc.Stats().InMsgs; got > 2*uint64(s.MaxScan) {
		t.Errorf("the first page of a %d-event budget received %d messages", s.MaxScan, got)
	}
	if got := f.all(t, q); !slices.Equal(got, want) {
		t.Fatalf("following cursors found %d events, want %d", len(got), len(want))
	}
}

// TestAuditSearchTimeBounds checks time ranges narrow the scanned
// sequences by stream time: with no slack, a range ending before the
// second batch was stored never reads it.
func TestAuditSearchTimeBounds(t *testing.T) {
	h := startHarness(t, Config{})
	h.s.slack = 0
	record := func(n int, tenant string) (from, to time.Time) {
		from = time.Now()
		for i := range n {
			ev := genEvent(i, time.Now())
			ev.Tenant, ev.Time = tenant, time.Now()
			h.pub.Record(&ev)
		}
		h.waitPublished(t, h.pub.Stats().Recorded)
		return from, time.Now()
	}
	_, mid1 := record(300, "before")
	mid2, _ := record(200, "after")

	p, err := h.s.Search(t.Context(), Query{Until: mid1, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 300 || p.Scanned != 300 {
		t.Fatalf("until: %d events, %d scanned; want the 300 before", len(p.Events), p.Scanned)
	}
	for _, e := range p.Events {
		if e.Tenant != "before" {
			t.Fatalf("until: got an event of %s", e.Tenant)
		}
	}
	p, err = h.s.Search(t.Context(), Query{Since: mid2, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 200 || p.Scanned != 200 {
		t.Fatalf("since: %d events, %d scanned; want the 200 after", len(p.Events), p.Scanned)
	}
	p, err = h.s.Search(t.Context(), Query{Since: time.Now().Add(time.Hour)})
	if err != nil || len(p.Events) != 0 {
		t.Fatalf("future since: %+v, %v", p, err)
	}
}

func TestAuditSearchErrors(t *testing.T) {
	h := startHarness(t, Config{})
	if _, err := h.s.Search(t.Context(), Query{Limit: MaxLimit + 1}); !errors.Is(err, ErrBadQuery) {
		t.Errorf("limit too big: %v, want ErrBadQuery", err)
	}
	now := time.Now()
	if _, err := h.s.Search(t.Context(), Query{Since: now, Until: now.Add(-time.Second)}); !errors.Is(err, ErrBadQuery) {
		t.Errorf("until before since: %v, want ErrBadQuery", err)
	}
	for _, o := range []string{"bogus", "tool-error", "OK", "-32602x"} {
		if _, err := h.s.Search(t.Context(), Query{Outcome: o}); !errors.Is(err, ErrBadQuery) {
			t.Errorf("outcome %q: %v, want ErrBadQuery", o, err)
		}
	}
	for _, o := range []string{"ok", "tool_error", "error", "-32602", "500"} {
		if _, err := h.s.Search(t.Context(), Query{Outcome: o}); err != nil {
			t.Errorf("outcome %q: %v", o, err)
		}
	}
	p, err := h.s.Search(t.Context(), Query{})
	if err != nil || len(p.Events) != 0 || p.Next != 0 {
		t.Errorf("empty stream: %+v, %v", p, err)
	}
	other, err := NewSearcher(h.nc, "NO_SUCH_STREAM")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Search(t.Context(), Query{}); !errors.Is(err, ErrNoStream) {
		t.Errorf("missing stream: %v, want ErrNoStream", err)
	}
}

func ExampleFilterSubject() {
	fmt.Println(FilterSubject("acme", "", "", ""))
	fmt.Println(FilterSubject("acme", "files", OutcomeOK, ""))
	fmt.Println(FilterSubject("", "", "", ""))
	// Output:
	// switchyard.v1.audit.acme.*.*.*
	// switchyard.v1.audit.acme.files.ok.*
	// switchyard.v1.audit.>
}
