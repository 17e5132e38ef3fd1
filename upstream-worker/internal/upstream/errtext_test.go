package upstream

import (
	"context"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

// goDetail matches what an error a client sees must not carry: Go's
// names for types and encoding/json's phrases for them.
var goDetail = regexp.MustCompile(`\*?\b[a-z][a-z0-9]*\.[A-Z]\w+|Go value of type|Go struct field|map\[|interface \{\}|json: |unmarshal`)

// noInternals fails the test if perr's message or data names the
// upstream's URL or address, or Go types.
func noInternals(t *testing.T, what string, perr *proto.Error, url string) {
	t.Helper()
	if perr == nil {
		t.Fatalf("%s: no error", what)
	}
	for _, s := range []string{perr.Msg, string(perr.Data)} {
		if goDetail.MatchString(s) || strings.Contains(s, "127.0.0.1") || strings.Contains(s, "http://") ||
			(url != "" && strings.Contains(s, strings.TrimPrefix(url, "http://"))) {
			t.Fatalf("%s: error %q (data %s) names internals", what, perr.Msg, perr.Data)
		}
	}
}

// TestUpstreamErrorTextNamesNoInternals: what the worker answers for an
// upstream it cannot reach (a closed port, a server that went away, HTTP
// errors), on the raw and the SDK path, names neither the upstream's URL
// nor its address nor Go types, and for a refused connection says so; and
// params the SDK path cannot decode are described in JSON's terms.
func TestUpstreamErrorTextNamesNoInternals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	s := newTestServer(t, "sse", statusIntercept)
	for _, sdk := range []bool{false, true} {
		u := startUpstream(t, s.url(), sdk, nil)
		rc := &rawConn{url: closed, hc: &http.Client{}, version: []string{legacyProtocol}, max: 1 << 20}
		p, perr := newRawParams(call("echo", "", `{}`))
		if perr != nil {
			t.Fatal(perr)
		}
		_, err := u.rawCall(t.Context(), rc, p, nil)
		perr = u.callError(t.Context(), err, nil)
		noInternals(t, "refused connection", perr, closed)
		if perr.Code != proto.CodeUpstreamUnavailable || !strings.Contains(perr.Msg, "connection refused") || !strings.Contains(perr.Msg, "correlation id") {
			t.Fatalf("refused connection: %v", perr)
		}
		for _, tool := range []string{"err500", "err403", "text", "garbage", "otherid", "noresponse", "malformed"} {
			_, perr := u.Call(t.Context(), call(tool, "", `{}`))
			noInternals(t, tool, perr, s.url())
		}
		_, perr = u.Call(t.Context(), &proto.Request{Method: "tools/call", Upstream: "up", Name: "echo", Params: []byte(`{"name":"up__echo","inputResponses":5}`)})
		if sdk {
			noInternals(t, "undecodable params", perr, "")
			if perr.Code != proto.CodeInvalidParams || !strings.Contains(perr.Msg, "params.inputResponses is a number, not an object") {
				t.Fatalf("undecodable params: %v", perr)
			}
		}
		_, perr = u.Request(t.Context(), &proto.Request{Method: "prompts/get", Upstream: "up", Name: "p", Params: []byte(`{"name":"p","arguments":{"a":5}}`)})
		if !sdk || perr == nil || perr.Code != proto.CodeInvalidParams {
			continue // the raw path sends the params as they are; the upstream answers
		}
		noInternals(t, "prompt arguments", perr, "")
		if !strings.Contains(perr.Msg, "params.arguments is a number, not a string") {
			t.Fatalf("prompt arguments: %v", perr)
		}
	}
	s.ts.CloseClientConnections()
	s.ts.Close()
	u := startUpstreamDown(t, closed)
	_, perr := u.Call(t.Context(), call("echo", "", `{}`))
	noInternals(t, "upstream never reached", perr, closed)
	if perr.Code != proto.CodeUpstreamUnavailable {
		t.Fatalf("upstream never reached: %v", perr)
	}
}

// startUpstreamDown runs an Upstream for a URL nothing listens on until
// the test ends, and waits until it has tried to connect.
func startUpstreamDown(tb testing.TB, url string) *Upstream {
	tb.Helper()
	o := Options{
		Spec:       proto.UpstreamSpec{Name: "up", Transport: proto.TransportStreamable, URL: url},
		HTTPClient: &http.Client{},
		Tools:      &memTools{},
		Closer:     NewCloser(),
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	}
	u := New(o)
	ctx, cancel := context.WithCancel(context.WithoutCancel(tb.Context()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		u.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	eventually(tb, 15*time.Second, "connect attempted", func() bool { st := u.State(); return !st.Up && st.Err != "connecting" })
	return u
}
