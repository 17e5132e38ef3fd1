package capture

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// DefaultMaxMessageBytes bounds one buffered response message (a JSON body
// or an SSE event that must be inspected): 64 MiB, the edge's default
// max_result_bytes.
const DefaultMaxMessageBytes = 64 << 20

// ErrTooLarge is returned by a rewritten body whose message exceeds the
// limit.
var ErrTooLarge = errors.New("capture: response message too large")

// RoundTripper captures raw results on the HTTP bodies of one streamable
// HTTP session (see the package doc). Give each upstream session its own
// RoundTripper (ids are per session); several may share one base
// *http.Transport. Safe for concurrent use.
type RoundTripper struct {
	base     http.RoundTripper
	tab      *Table
	maxBytes int
}

// NewRoundTripper returns a RoundTripper over base (nil:
// http.DefaultTransport). maxBytes bounds a buffered message; 0 means
// [DefaultMaxMessageBytes].
func NewRoundTripper(base http.RoundTripper, maxBytes int) *RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxMessageBytes
	}
	return &RoundTripper{base: base, tab: NewTable(), maxBytes: maxBytes}
}

// Pending returns the number of recorded calls still waiting for their
// response.
func (rt *RoundTripper) Pending() int { return rt.tab.Len() }

// RoundTrip records the id of a POSTed call whose request context carries a
// [Slot], then rewrites the response body (application/json or
// text/event-stream, POST or GET) so that the matching response is
// captured. Other bodies pass through untouched.
func (rt *RoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost {
		if s := From(req.Context()); s != nil {
			var err error
			if req, err = rt.record(req, s); err != nil {
				return nil, err
			}
		}
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &jsonBody{body: resp.Body, tab: rt.tab, max: rt.maxBytes}
	case "text/event-stream":
		resp.Body = newSSEFilter(resp.Body, rt.tab, rt.maxBytes)
	default:
		return resp, nil
	}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// record reads the request body (through GetBody when it can, leaving
// req.Body for the transport) and maps the call's id to s. A request whose
// body cannot be re-read is cloned with a fresh body.
func (rt *RoundTripper) record(req *http.Request, s *Slot) (*http.Request, error) {
	var body []byte
	var err error
	if req.GetBody != nil {
		var rc io.ReadCloser
		if rc, err = req.GetBody(); err == nil {
			body, err = io.ReadAll(rc)
			rc.Close()
		}
	} else if req.Body != nil {
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	if err != nil {
		return nil, fmt.Errorf("capture: read request body: %w", err)
	}
	if key, ok := requestKey(body); ok {
		rt.tab.record(key, s)
	}
	return req, nil
}

// jsonBody rewrites an application/json body on first Read. If nothing is
// pending at that point it streams the body through untouched.
type jsonBody struct {
	body io.ReadCloser
	tab  *Table
	max  int

	started bool
	r       io.Reader
}

func (b *jsonBody) Read(p []byte) (int, error) {
	if !b.started {
		b.started = true
		b.r = b.body
		if !b.tab.empty() {
			data, err := io.ReadAll(io.LimitReader(b.body, int64(b.max)+1))
			if err != nil {
				return 0, err
			}
			if len(data) > b.max {
				return 0, ErrTooLarge
			}
			out, _ := b.tab.rewrite(data)
			b.r = bytes.NewReader(out)
		}
	}
	return b.r.Read(p)
}

func (b *jsonBody) Close() error { return b.body.Close() }
