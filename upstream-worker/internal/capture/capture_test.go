package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var stub = []byte(`{"content":[]}`)

// fakeRT answers every request with a fixed content type and body, and
// remembers the request body it saw.
type fakeRT struct {
	ctype string
	body  string
	seen  []byte
}

func (f *fakeRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		f.seen, _ = io.ReadAll(r.Body)
		r.Body.Close()
	}
	h := http.Header{}
	if f.ctype != "" {
		h.Set("Content-Type", f.ctype)
	}
	return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader(f.body)), Request: r}, nil
}

func post(t *testing.T, rt http.RoundTripper, ctx context.Context, body string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return got
}

const call7 = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`

func TestCaptureRoundTripper(t *testing.T) {
	big := `{"content":[{"type":"text","text":"` + strings.Repeat("z", 8<<20) + `"}]}`
	odd := `{"content":[{"type":"hologram","frames":[1.000000000000000001,2e400]}],"isError":false}`
	cases := []struct {
		name     string
		ctype    string
		body     string
		reqBody  string
		slot     bool
		stub     []byte
		want     string // the body the SDK reads
		captured string // "" : nothing captured
	}{
		{
			name: "json", ctype: "application/json", slot: true, stub: stub, reqBody: call7,
			body:     `{"jsonrpc":"2.0","id":7,"result":` + odd + `}`,
			want:     `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`,
			captured: odd,
		},
		{
			name: "json charset, no stub keeps body", ctype: "application/json; charset=utf-8", slot: true, reqBody: call7,
			body:     `{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`,
			want:     `{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`,
			captured: `{"tools":[]}`,
		},
		{
			name: "json no slot untouched", ctype: "application/json", reqBody: call7,
			body: `{"jsonrpc":"2.0","id":7,"result":` + odd + `}`,
			want: `{"jsonrpc":"2.0","id":7,"result":` + odd + `}`,
		},
		{
			name: "json error response", ctype: "application/json", slot: true, stub: stub, reqBody: call7,
			body: `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"bad"}}`,
			want: `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"bad"}}`,
		},
		{
			name: "json other id", ctype: "application/json", slot: true, stub: stub, reqBody: call7,
			body: `{"jsonrpc":"2.0","id":8,"result":{}}`,
			want: `{"jsonrpc":"2.0","id":8,"result":{}}`,
		},
		{
			name: "string id", ctype: "application/json", slot: true, stub: stub,
			reqBody:  `{"jsonrpc":"2.0","id":"a1","method":"tools/call"}`,
			body:     `{"jsonrpc":"2.0","id":"a1","result":{"x":1}}`,
			want:     `{"jsonrpc":"2.0","id":"a1","result":{"content":[]}}`,
			captured: `{"x":1}`,
		},
		{
			name: "sse notifications before the response", ctype: "text/event-stream", slot: true, stub: stub, reqBody: call7,
			body: "id: s_1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
				": keepalive\n\n" +
				"event: message\nid: s_2\nretry: 100\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":" + odd + "}\n\n",
			want: "id: s_1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
				": keepalive\n\n" +
				"event: message\nid: s_2\nretry: 100\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n",
			captured: odd,
		},
		{
			name: "sse multi-line data and CRLF", ctype: "text/event-stream", slot: true, stub: stub, reqBody: call7,
			body:     "data: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":7,\r\ndata:\"result\":{\"a\":\r\ndata: [1,\r\ndata: 2]}}\r\nid: 9\r\n\r\n",
			want:     "id: 9\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\r\n",
			captured: "{\"a\":\n[1,\n2]}",
		},
		{
			name: "sse server request with same id passes", ctype: "text/event-stream", slot: true, stub: stub, reqBody: call7,
			body: "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"sampling/createMessage\",\"params\":{}}\n\n",
			want: "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"sampling/createMessage\",\"params\":{}}\n\n",
		},
		{
			name: "sse other event name passes", ctype: "text/event-stream", slot: true, stub: stub, reqBody: call7,
			body: "event: ping\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n",
			want: "event: ping\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n",
		},
		{
			name: "sse no slot untouched", ctype: "text/event-stream", reqBody: call7,
			body: "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":" + odd + "}\n\n",
			want: "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":" + odd + "}\n\n",
		},
		{
			name: "sse without final blank line", ctype: "text/event-stream", slot: true, stub: stub, reqBody: call7,
			body:     "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"b\":2}}",
			want:     "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n",
			captured: `{"b":2}`,
		},
		{
			name: "sse big result", ctype: "text/event-stream", slot: true, stub: stub, reqBody: call7,
			body:     "id: x\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":" + big + "}\n\n",
			want:     "id: x\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n",
			captured: big,
		},
		{
			name: "json big result", ctype: "application/json", slot: true, stub: stub, reqBody: call7,
			body:     `{"jsonrpc":"2.0","id":7,"result":` + big + `}`,
			want:     `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`,
			captured: big,
		},
		{
			name: "other content type untouched", ctype: "text/plain", slot: true, stub: stub, reqBody: call7,
			body: `{"jsonrpc":"2.0","id":7,"result":{}}`,
			want: `{"jsonrpc":"2.0","id":7,"result":{}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := &fakeRT{ctype: tc.ctype, body: tc.body}
			rt := NewRoundTripper(base, 0)
			ctx := t.Context()
			var s *Slot
			if tc.slot {
				s = NewSlot(tc.stub)
				ctx = With(ctx, s)
			}
			got := post(t, rt, ctx, tc.reqBody)
			if string(base.seen) != tc.reqBody {
				t.Errorf("upstream saw request body %q, want %q", trunc(base.seen), tc.reqBody)
			}
			if string(got) != tc.want {
				t.Errorf("body = %q\nwant   %q", trunc(got), trunc([]byte(tc.want)))
			}
			if s == nil {
				return
			}
			res, ok := s.Result()
			if tc.captured == "" {
				if ok {
					t.Errorf("captured %q, want nothing", trunc(res))
				}
			} else if !ok || string(res) != tc.captured {
				t.Errorf("captured %v %q, want %q", ok, trunc(res), trunc([]byte(tc.captured)))
			}
			s.Release()
			if n := rt.Pending(); n != 0 {
				t.Errorf("%d calls still pending after Release", n)
			}
		})
	}
}

func trunc(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…(" + itoa(len(b)) + " bytes)"
	}
	return string(b)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestCaptureSSESmallReads proves the filter works one byte at a time, and
// that an event which starts while nothing is pending streams through.
func TestCaptureSSESmallReads(t *testing.T) {
	tab := NewTable()
	s := NewSlot(stub)
	body := "data: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n"
	// Nothing pending: streamed through.
	f := newSSEFilter(io.NopCloser(iotest.OneByteReader(strings.NewReader(body))), tab, 1<<20)
	got, err := io.ReadAll(iotest.OneByteReader(f))
	if err != nil || string(got) != body {
		t.Fatalf("passthrough = %q, %v", got, err)
	}
	tab.record("n3", s)
	body = "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"k\":[1]}}\n\n"
	f = newSSEFilter(io.NopCloser(iotest.OneByteReader(strings.NewReader(body))), tab, 1<<20)
	got, err = io.ReadAll(iotest.OneByteReader(f))
	want := "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[]}}\n\n"
	if err != nil || string(got) != want {
		t.Fatalf("rewritten = %q, %v; want %q", got, err, want)
	}
	if res, _ := s.Result(); string(res) != `{"k":[1]}` {
		t.Fatalf("captured %q", res)
	}
}

func TestCaptureSSETooLarge(t *testing.T) {
	tab := NewTable()
	tab.record("n1", NewSlot(stub))
	body := "data: " + strings.Repeat("x", 200<<10) + "\n\n"
	f := newSSEFilter(io.NopCloser(strings.NewReader(body)), tab, 100<<10)
	if _, err := io.ReadAll(f); err != ErrTooLarge {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

// TestCaptureSSELongPassthroughLine checks that a line longer than the read
// buffer, in an event that streams through, is not split into events.
func TestCaptureSSELongPassthroughLine(t *testing.T) {
	tab := NewTable()
	body := "data: " + strings.Repeat("y", 200<<10) + "\n\nid: 2\ndata: {}\n\n"
	f := newSSEFilter(io.NopCloser(strings.NewReader(body)), tab, 1<<10)
	got, err := io.ReadAll(f)
	if err != nil || string(got) != body {
		t.Fatalf("got %d bytes, err %v", len(got), err)
	}
}

// TestCaptureGetBodyRestored checks that a body without GetBody is
// restored for the transport.
func TestCaptureGetBodyRestored(t *testing.T) {
	base := &fakeRT{ctype: "application/json", body: `{"jsonrpc":"2.0","id":7,"result":{"z":0}}`}
	rt := NewRoundTripper(base, 0)
	s := NewSlot(stub)
	req, _ := http.NewRequestWithContext(With(t.Context(), s), http.MethodPost, "http://u.test", io.NopCloser(strings.NewReader(call7)))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if string(base.seen) != call7 {
		t.Fatalf("upstream saw %q", base.seen)
	}
	if res, ok := s.Result(); !ok || string(res) != `{"z":0}` {
		t.Fatalf("captured %q", res)
	}
}

// pipeConn is an mcp.Connection fed from a channel.
type pipeConn struct {
	in      chan jsonrpc.Message
	written []jsonrpc.Message
}

func (p *pipeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-p.in:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (p *pipeConn) Write(_ context.Context, m jsonrpc.Message) error {
	p.written = append(p.written, m)
	return nil
}
func (p *pipeConn) Close() error      { return nil }
func (p *pipeConn) SessionID() string { return "sid" }

type pipeTransport struct{ c *pipeConn }

func (p pipeTransport) Connect(context.Context) (mcp.Connection, error) { return p.c, nil }

func TestCaptureWrapTransport(t *testing.T) {
	pc := &pipeConn{in: make(chan jsonrpc.Message, 4)}
	c, err := WrapTransport(pipeTransport{pc}).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.SessionID() != "sid" {
		t.Errorf("SessionID not passed through")
	}
	s := NewSlot(stub)
	ctx := With(t.Context(), s)
	id := mkID(t, 5)
	if err := c.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/call"}); err != nil {
		t.Fatal(err)
	}
	// A call without a slot is not recorded.
	_ = c.Write(t.Context(), &jsonrpc.Request{ID: mkID(t, 6), Method: "tools/call"})
	raw := json.RawMessage(`{"content":[{"type":"hologram"}]}`)
	pc.in <- &jsonrpc.Request{Method: "notifications/progress"}
	pc.in <- &jsonrpc.Response{ID: mkID(t, 6), Result: json.RawMessage(`{"u":1}`)}
	pc.in <- &jsonrpc.Response{ID: id, Result: raw}
	for range 2 {
		if _, err := c.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := s.Result(); ok {
		t.Fatal("captured before the response arrived")
	}
	m, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.(*jsonrpc.Response).Result; !bytes.Equal(got, stub) {
		t.Errorf("SDK sees %s, want the stub", got)
	}
	if res, ok := s.Result(); !ok || !bytes.Equal(res, raw) {
		t.Errorf("captured %s", res)
	}
}

func TestCaptureReleaseForgets(t *testing.T) {
	tab := NewTable()
	s := NewSlot(nil)
	tab.record("n1", s)
	tab.record("n2", s)
	s.Release()
	if tab.Len() != 0 {
		t.Fatalf("%d left after Release", tab.Len())
	}
	tab.record("n3", s) // after Release: ignored
	if tab.Len() != 0 {
		t.Fatal("recorded after Release")
	}
}

func mkID(t *testing.T, n float64) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(n)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
