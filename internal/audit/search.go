package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Search limits.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
	// DefaultMaxScan bounds the events one Search reads from the stream;
	// a search that reaches it returns what it found with a cursor to go
	// on from.
	DefaultMaxScan = 250_000
	// timeSlack widens the stream-time bounds of a time range: an event's
	// Time is the edge's clock when the request arrived, its stream time
	// when the publish landed (later by the buffering, or off by clock
	// skew). Events are then filtered by their own Time exactly.
	timeSlack = time.Minute
)

// Query selects audit events. Empty fields match everything.
type Query struct {
	Tenant    string `json:"tenant,omitempty"`
	Principal string `json:"principal,omitempty"`
	Upstream  string `json:"upstream,omitempty"`
	// Tool matches Event.Name exactly: a tool or prompt name as the
	// upstream knows it, or a resource URI.
	Tool   string `json:"tool,omitempty"`
	Method string `json:"method,omitempty"`
	// Outcome is OutcomeOK, OutcomeToolError, an error code ("-32602"),
	// or OutcomeError for every outcome but ok.
	Outcome string `json:"outcome,omitempty"`
	// Since and Until bound Event.Time (inclusive); zero is unbounded.
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Limit is the page size; 0 is DefaultLimit, at most MaxLimit.
	Limit int `json:"limit,omitempty"`
	// Cursor continues a search: only events older than it (stream
	// sequence below Cursor) are returned. 0 starts at the newest.
	Cursor uint64 `json:"cursor,omitempty"`
}

// Hit is one event found, with its stream sequence.
type Hit struct {
	Seq uint64 `json:"seq"`
	Event
}

// Page is one page of a search, newest first.
type Page struct {
	Events []Hit `json:"events"`
	// Next is the cursor for the next (older) page; 0 when the search
	// reached the oldest event in range. A page can hold fewer than Limit
	// events and still have a Next (the scan bound was reached).
	Next uint64 `json:"next_cursor,omitempty"`
	// Scanned is how many stored events the search read.
	Scanned int `json:"scanned"`
}

// Searcher searches the audit stream. Safe for concurrent use.
type Searcher struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
	// MaxScan bounds the events one Search reads; 0 is DefaultMaxScan.
	MaxScan int
	// Timeout bounds each stream request; 0 is 5 s.
	Timeout time.Duration

	slack time.Duration // timeSlack; tests shrink it
}

// NewSearcher returns a Searcher of stream ("" is DefaultStream) on nc.
func NewSearcher(nc *nats.Conn, stream string) (*Searcher, error) {
	if nc == nil {
		panic("audit: nil nats connection")
	}
	if stream == "" {
		stream = DefaultStream
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &Searcher{nc: nc, js: js, stream: stream, slack: timeSlack}, nil
}

// ErrBadQuery is returned by Search for a query it cannot run.
var ErrBadQuery = errors.New("audit: bad query")

// validOutcome reports whether o is a query outcome: empty (any),
// OutcomeOK, OutcomeToolError, OutcomeError, or an integer error code.
func validOutcome(o string) bool {
	switch o {
	case "", OutcomeOK, OutcomeToolError, OutcomeError:
		return true
	}
	_, err := strconv.ParseInt(o, 10, 64)
	return err == nil
}

// ErrNoStream is returned by Search when the audit stream does not exist.
var ErrNoStream = errors.New("audit: no audit stream")

// Search returns the newest events matching q, older than q.Cursor.
// Errors: ErrBadQuery, ErrNoStream, or a stream request's error.
func (s *Searcher) Search(ctx context.Context, q Query) (*Page, error) {
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	if q.Limit < 0 || q.Limit > MaxLimit {
		return nil, fmt.Errorf("%w: limit %d not in 1..%d", ErrBadQuery, q.Limit, MaxLimit)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return nil, fmt.Errorf("%w: until before since", ErrBadQuery)
	}
	if !validOutcome(q.Outcome) {
		// A misspelt outcome would match nothing and read as "no such
		// events".
		return nil, fmt.Errorf("%w: outcome %q is not ok, tool_error, error or a JSON-RPC error code", ErrBadQuery, q.Outcome)
	}
	maxScan := s.MaxScan
	if maxScan <= 0 {
		maxScan = DefaultMaxScan
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, max(timeout, 10*time.Second))
	defer cancel()

	st, err := s.js.Stream(ctx, s.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, ErrNoStream
	}
	if err != nil {
		return nil, fmt.Errorf("audit: stream info: %w", err)
	}
	state := st.CachedInfo().State
	page := &Page{Events: []Hit{}}
	if state.Msgs == 0 {
		return page, nil
	}

	r := &reader{s: s, timeout: timeout}
	if err := r.open(); err != nil {
		return nil, err
	}
	defer r.close()

	lo, hi := state.FirstSeq, state.LastSeq
	if q.Cursor != 0 {
		if q.Cursor <= lo {
			return page, nil
		}
		hi = min(hi, q.Cursor-1)
	}
	if !q.Since.IsZero() {
		seq, ok, err := r.seqFromTime(ctx, q.Since.Add(-s.slack))
		if err != nil {
			return nil, err
		}
		if !ok {
			return page, nil
		}
		lo = max(lo, seq)
	}
	if !q.Until.IsZero() {
		seq, ok, err := r.seqFromTime(ctx, q.Until.Add(s.slack))
		if err != nil {
			return nil, err
		}
		if ok {
			if seq == 0 {
				return page, nil
			}
			hi = min(hi, seq-1)
		}
	}

	outcome := q.Outcome
	if outcome == OutcomeError {
		outcome = ""
	}
	filter := FilterSubject(q.Tenant, q.Upstream, outcome, q.Tool)
	match := func(ev *Event) bool {
		switch {
		case q.Tool != "" && ev.Name != q.Tool,
			q.Principal != "" && ev.Principal != q.Principal,
			q.Method != "" && ev.Method != q.Method,
			q.Outcome == OutcomeError && ev.Outcome == OutcomeOK,
			!q.Since.IsZero() && ev.Time.Before(q.Since),
			!q.Until.IsZero() && ev.Time.After(q.Until):
			return false
		}
		return true
	}

	// The first window is sized from the density of subject matches: the
	// stream counts them from its subject index (one request, no scan),
	// and the window reaches back to where about 1.3 pages of them lie.
	// The server scans every sequence of a window (the file store keeps
	// no per-subject index inside a block), so a window is kept to what
	// the page needs; windows that come up short (the client-side filters
	// thinned them) grow fourfold per round.
	window := uint64(max(q.Limit*13/10, 64))
	batch := int(window)
	if filter != SubjectAll {
		total, err := r.countFrom(ctx, filter, lo)
		if err != nil {
			return nil, err
		}
		if total == 0 {
			return page, nil
		}
		span := state.LastSeq - lo + 1
		window = min(uint64(q.Limit)*13/10*span/total+64, 1<<22)
		batch = int(min(total*window/span+32, 4096))
	}
	var raw []rawMsg
	var covered uint64 // sequences the windows have covered
	for hi >= lo {
		// A window never holds more than the scan budget left, and its
		// batch shrinks with it: the server reads a batch on past the
		// window's end, so a batch sized for the unclamped window
		// streamed events the page threw away (up to 4096 a request,
		// up to 40 times the budget over a page).
		if left := uint64(max(maxScan-page.Scanned, 1)); window > left {
			batch = max(int(uint64(batch)*left/window), 1)
			window = left
		}
		start := lo
		if hi-lo+1 > window {
			start = hi - window + 1
		}
		raw = raw[:0]
		raw, err = r.fetch(ctx, filter, start, hi, batch, raw)
		if err != nil {
			return nil, err
		}
		page.Scanned += len(raw)
		for i := len(raw) - 1; i >= 0; i-- {
			var h Hit
			if err := Decode(raw[i].data, &h.Event); err != nil {
				continue // not an event: skipped, as a search must go on
			}
			if !match(&h.Event) {
				continue
			}
			h.Seq = raw[i].seq
			page.Events = append(page.Events, h)
			if len(page.Events) == q.Limit {
				if h.Seq > lo {
					page.Next = h.Seq
				}
				return page, nil
			}
		}
		if start == lo || start == 0 {
			return page, nil
		}
		if page.Scanned >= maxScan {
			page.Next = start
			return page, nil
		}
		// Size the next window from the hits per sequence so far (the
		// client-side filters show their selectivity there), and its
		// batches from this window's subject matches per sequence, so the
		// last batch reads little past the window's end.
		prev := hi - start + 1
		covered += prev
		hi = start - 1
		if hits := uint64(len(page.Events)); hits > 0 {
			need := uint64(q.Limit) - hits
			window = need*13/10*covered/hits + 64
		} else {
			window *= 8
		}
		window = min(window, 1<<22)
		batch = int(min(max(uint64(len(raw))*window/prev+32, 64), 4096))
	}
	return page, nil
}

// countFrom returns how many events on subjects matching filter are
// stored from sequence seq on. From the stream's first sequence the
// server answers from its subject index without reading blocks.
func (r *reader) countFrom(ctx context.Context, filter string, seq uint64) (uint64, error) {
	if err := r.request(&directReq{Seq: seq, NextFor: filter, Batch: 1}); err != nil {
		return 0, err
	}
	var n uint64
	for {
		m, err := r.next(ctx)
		if err != nil {
			return 0, err
		}
		switch code := m.Header.Get("Status"); code {
		case "":
			n = 1
		case "204":
			np, err := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("audit: direct get: bad pending count: %w", err)
			}
			return n + np, nil
		case "404":
			return 0, nil
		default:
			return 0, fmt.Errorf("audit: direct get: status %s %s", code, m.Header.Get("Description"))
		}
	}
}

// rawMsg is one stored event read by a reader.
type rawMsg struct {
	seq  uint64
	data []byte
}

// reader runs direct get requests for one Search, one at a time, on one
// inbox subscription.
type reader struct {
	s       *Searcher
	timeout time.Duration
	inbox   string
	sub     *nats.Subscription
}

func (r *reader) open() error {
	r.inbox = r.s.nc.NewInbox()
	sub, err := r.s.nc.SubscribeSync(r.inbox)
	if err != nil {
		return fmt.Errorf("audit: subscribe: %w", err)
	}
	_ = sub.SetPendingLimits(-1, 256<<20)
	r.sub = sub
	return nil
}

func (r *reader) close() { _ = r.sub.Unsubscribe() }

// directReq is the body of a $JS.API.DIRECT.GET request (nats-server
// JSApiMsgGetRequest).
type directReq struct {
	Seq       uint64     `json:"seq,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	Batch     int        `json:"batch,omitempty"`
	MaxBytes  int        `json:"max_bytes,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

func (r *reader) request(req *directReq) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return r.s.nc.PublishRequest("$JS.API.DIRECT.GET."+r.s.stream, r.inbox, body)
}

func (r *reader) next(ctx context.Context) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	m, err := r.sub.NextMsgWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: direct get: %w", err)
	}
	return m, nil
}

// seqFromTime returns the sequence of the first event stored at or after
// t; ok is false when there is none.
func (r *reader) seqFromTime(ctx context.Context, t time.Time) (seq uint64, ok bool, err error) {
	t = t.UTC()
	if err := r.request(&directReq{StartTime: &t}); err != nil {
		return 0, false, err
	}
	m, err := r.next(ctx)
	if err != nil {
		return 0, false, err
	}
	switch code := m.Header.Get("Status"); code {
	case "":
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("audit: direct get: bad sequence: %w", err)
		}
		return seq, true, nil
	case "404":
		return 0, false, nil
	default:
		return 0, false, fmt.Errorf("audit: direct get: status %s %s", code, m.Header.Get("Description"))
	}
}

// fetch appends the events on subjects matching filter with sequences in
// [start, hi], oldest first, reading batches of at most batch.
func (r *reader) fetch(ctx context.Context, filter string, start, hi uint64, batch int, out []rawMsg) ([]rawMsg, error) {
	if filter == SubjectAll {
		// Every stored subject matches: no filter lets the server count
		// and walk by sequence instead of matching subjects.
		filter = ""
	}
	seq := start
	for seq <= hi {
		if err := r.request(&directReq{Seq: seq, NextFor: filter, Batch: batch, MaxBytes: 16 << 20}); err != nil {
			return out, err
		}
		var last uint64
		more := true
		for {
			m, err := r.next(ctx)
			if err != nil {
				return out, err
			}
			switch code := m.Header.Get("Status"); code {
			case "":
			case "204": // end of batch
				if m.Header.Get("Nats-Num-Pending") == "0" {
					more = false
				}
				goto done
			case "404": // nothing at or after seq
				return out, nil
			default:
				return out, fmt.Errorf("audit: direct get: status %s %s", code, m.Header.Get("Description"))
			}
			s, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
			if err != nil {
				return out, fmt.Errorf("audit: direct get: bad sequence: %w", err)
			}
			last = s
			if s <= hi {
				out = append(out, rawMsg{seq: s, data: m.Data})
			}
		}
	done:
		if !more || last == 0 || last >= hi {
			return out, nil
		}
		seq = last + 1
	}
	return out, nil
}
