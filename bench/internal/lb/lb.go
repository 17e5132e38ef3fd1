// Package lb is a plain round-robin HTTP load balancer for edges, as an
// operator would put one in front of them: no session affinity (each
// request goes to the next backend, whatever session it belongs to),
// streams (SSE) passed through as they come, and the usual health
// handling of a production balancer:
//
//   - an active check: every [CheckInterval] each backend's /readyz is
//     read, and a backend not answering 200 gets no new requests (unless
//     none does);
//   - a passive one: a backend that refuses a connection is skipped for
//     [DownFor], and the request is sent to another backend instead (no
//     byte of it reached the refused one);
//   - request bodies up to [MaxBufferedBody] are buffered, so that a
//     request that could not be written to a kept-alive connection the
//     backend closed meanwhile is sent again on a new one (net/http's
//     transport does, when it can rewind the body). A request the backend
//     may have read is never sent again: a tools/call must not run twice.
//
// "bench lb", the fault harness (bench chaos) and `make conformance`'s ha
// mode use it.
package lb

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"sync/atomic"
	"time"
)

const (
	// CheckInterval is how often each backend's /readyz is read.
	CheckInterval = 250 * time.Millisecond
	// DownFor is how long a backend that refused a connection is skipped.
	DownFor = time.Second
	// MaxBufferedBody is the largest request body buffered for a resend;
	// larger ones stream through and are not resent.
	MaxBufferedBody = 8 << 20
)

// Balancer is the load balancer; an http.Handler. Safe for concurrent use.
type Balancer struct {
	backends []*backend
	next     atomic.Uint64
	proxy    *httputil.ReverseProxy
	check    *http.Client
}

type backend struct {
	addr      string // host:port
	ready     atomic.Bool
	downUntil atomic.Int64 // Unix nanoseconds; 0: not refused lately
}

func (b *backend) usable(now int64) bool { return b.ready.Load() && b.downUntil.Load() <= now }

// New returns a balancer over hosts (host:port each, plain HTTP); each
// counts as ready until its first check. logger receives the proxy's
// errors.
func New(hosts []string, logger *log.Logger) *Balancer {
	lb := &Balancer{check: &http.Client{Timeout: time.Second}}
	for _, h := range hosts {
		b := &backend{addr: h}
		b.ready.Store(true)
		lb.backends = append(lb.backends, b)
	}
	dialer := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return lb.dial(ctx, dialer, network, addr)
	}
	lb.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", lb.pick().addr
			r.Out.Host = r.In.Host
		},
		Transport:     tr,
		FlushInterval: -1, // SSE: every event as it comes
		ErrorLog:      logger,
	}
	return lb
}

// pick returns the next usable backend in turn, or the next one if none is.
func (lb *Balancer) pick() *backend {
	n := uint64(len(lb.backends))
	start := lb.next.Add(1) - 1
	now := time.Now().UnixNano()
	for i := range n {
		if b := lb.backends[(start+i)%n]; b.usable(now) {
			return b
		}
	}
	return lb.backends[start%n]
}

// dial connects to addr, or, if it refuses, to the other usable backends
// in turn: nothing of the request has reached a backend yet.
func (lb *Balancer) dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		return c, nil
	}
	first := err
	now := time.Now()
	for _, b := range lb.backends {
		if b.addr == addr {
			b.downUntil.Store(now.Add(DownFor).UnixNano())
		}
	}
	for _, b := range lb.backends {
		if b.addr == addr || !b.usable(now.UnixNano()) {
			continue
		}
		if c, err := d.DialContext(ctx, network, b.addr); err == nil {
			return c, nil
		}
		b.downUntil.Store(time.Now().Add(DownFor).UnixNano())
	}
	return nil, first
}

// ServeHTTP buffers a small body (so a request that never reached a
// backend can be sent again) and proxies the request.
func (lb *Balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength <= MaxBufferedBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, MaxBufferedBody+1))
		if err != nil {
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(b) <= MaxBufferedBody {
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
			r.ContentLength = int64(len(b))
		} else {
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		}
	}
	lb.proxy.ServeHTTP(w, r)
}

// Run reads every backend's /readyz each [CheckInterval] until ctx ends.
func (lb *Balancer) Run(ctx context.Context) {
	t := time.NewTicker(CheckInterval)
	defer t.Stop()
	for {
		for _, b := range lb.backends {
			go lb.probe(ctx, b)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (lb *Balancer) probe(ctx context.Context, b *backend) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.addr+"/readyz", nil)
	if err != nil {
		return
	}
	resp, err := lb.check.Do(req)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			b.ready.Store(false)
		}
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	b.ready.Store(resp.StatusCode == http.StatusOK)
}
