// Package proxy is the thinnest HTTP reverse proxy the latency gate puts in
// front of a fixture upstream ("bench proxy"): net/http/httputil's
// ReverseProxy and nothing else. Its added latency is the floor any
// gateway process adds on the machine (a loopback hop, one HTTP parse and
// one HTTP write), against which Switchyard's own cost is read.
package proxy

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// MaxIdleConnsPerHost is the number of idle upstream connections the
// proxy keeps. Go's default of 2 would make concurrent calls dial new
// connections; with this many, a warmed-up proxy never dials per call.
const MaxIdleConnsPerHost = 256

// ErrUpstream is returned (wrapped) by [ParseUpstream] for a URL the proxy
// cannot forward to.
var ErrUpstream = errors.New("proxy: upstream must be an absolute http or https URL")

// ParseUpstream parses raw, the upstream's MCP endpoint, and checks that it
// is an absolute http or https URL with a host. It returns [ErrUpstream]
// (wrapped) otherwise.
func ParseUpstream(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrUpstream, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: %q", ErrUpstream, raw)
	}
	return u, nil
}

// New returns a reverse proxy that sends every request to upstream's
// scheme, host and path: the incoming path is replaced by upstream's (so
// the proxy serves the MCP endpoint at any path), the query is kept, and
// the Host header becomes upstream's. Responses are flushed as they are
// written (FlushInterval -1), so SSE streams through. It uses a transport
// of its own (see [NewTransport]). errLog receives proxying errors; nil
// means the standard logger. The handler is safe for concurrent use.
func New(upstream *url.URL, errLog *log.Logger) *httputil.ReverseProxy {
	target := *upstream
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.URL.Path, pr.Out.URL.RawPath = target.Path, target.RawPath
			pr.Out.Host = ""
		},
		Transport:     NewTransport(),
		FlushInterval: -1,
		ErrorLog:      errLog,
	}
}

// NewTransport returns a clone of http.DefaultTransport that keeps
// [MaxIdleConnsPerHost] idle connections per host.
func NewTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return tr
}

// Endpoint returns the MCP endpoint a client uses through a proxy
// reachable at addr (host:port) in front of upstream: the proxy's base
// URL plus upstream's path, e.g. "http://127.0.0.1:4711/mcp".
func Endpoint(addr string, upstream *url.URL) string {
	return (&url.URL{Scheme: "http", Host: addr, Path: upstream.Path, RawPath: upstream.RawPath}).String()
}
