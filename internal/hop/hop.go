// Package hop carries per-hop timing stamps of one call across NATS
// headers, for the bench driver's per-hop attribution.
//
// Stamping is opt-in per call: a client asks for it with
// `_meta: {"dev.switchyard/timing": true}` on tools/call; the edge then sets
// [Header] and every hop adds its stamps (Unix nanoseconds, decimal) to the
// message it passes on; the worker returns all of them on its reply, and the
// edge puts the set in the result's `_meta["dev.switchyard/timing"]`, as
// nanoseconds since edge_in.
// Calls without the flag carry no extra headers and pay nothing.
package hop

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Header marks a traced call; stamp headers start with [Prefix].
const (
	Header = "Sy-Trace"
	Prefix = "Sy-T-"
	// MetaKey is the _meta key a client sets to ask for timings, and under
	// which the edge returns them.
	MetaKey = "dev.switchyard/timing"
)

// Stamp names, in path order.
const (
	EdgeIn    = "edge_in"    // the edge's middleware received the call
	EdgePub   = "edge_pub"   // the edge published it
	RouterIn  = "router_in"  // the router received it
	RouterOut = "router_out" // the router forwarded it
	WorkerIn  = "worker_in"  // the worker received it
	UpSent    = "up_sent"    // the worker sent it upstream
	UpRecv    = "up_recv"    // the upstream's answer arrived
	WorkerOut = "worker_out" // the worker published the reply
	EdgeRecv  = "edge_recv"  // the edge had the whole reply
	EdgeOut   = "edge_out"   // the edge handed the result to the SDK
)

// Order lists the stamps in path order.
var Order = []string{EdgeIn, EdgePub, RouterIn, RouterOut, WorkerIn, UpSent, UpRecv, WorkerOut, EdgeRecv, EdgeOut}

// Traced reports whether a message belongs to a traced call.
func Traced(h nats.Header) bool { return h != nil && h.Get(Header) != "" }

// Set stamps name = now into h.
func Set(h nats.Header, name string) {
	h.Set(Prefix+name, strconv.FormatInt(time.Now().UnixNano(), 10))
}

// Copy copies the trace flag and every stamp from src to dst.
func Copy(dst, src nats.Header) {
	for k, v := range src {
		if k == Header || strings.HasPrefix(k, Prefix) {
			dst[k] = v
		}
	}
}

// Stamps reads every stamp in h, by name.
func Stamps(h nats.Header) map[string]int64 {
	out := map[string]int64{}
	for k, v := range h {
		if n, ok := strings.CutPrefix(k, Prefix); ok && len(v) > 0 {
			if t, err := strconv.ParseInt(v[0], 10, 64); err == nil {
				out[n] = t
			}
		}
	}
	return out
}

// Relative rewrites stamps as nanoseconds since edge_in (which becomes 0),
// so they survive JSON clients that decode numbers as float64.
func Relative(st map[string]int64) map[string]int64 {
	base, ok := st[EdgeIn]
	if !ok {
		return st
	}
	for k, v := range st {
		st[k] = v - base
	}
	return st
}

// Trace collects stamps made deeper in a call (the worker's upstream
// send/receive), safe for concurrent use.
type Trace struct {
	mu sync.Mutex
	h  nats.Header
}

// NewTrace returns a trace that stamps into h (which the caller must not
// touch concurrently with Mark; reading it after the call returned on the
// same goroutine is fine).
func NewTrace(h nats.Header) *Trace { return &Trace{h: h} }

type ctxKey struct{}

// With returns ctx carrying t.
func With(ctx context.Context, t *Trace) context.Context { return context.WithValue(ctx, ctxKey{}, t) }

// Mark stamps name on the trace in ctx, if any.
func Mark(ctx context.Context, name string) {
	if t, _ := ctx.Value(ctxKey{}).(*Trace); t != nil {
		t.mu.Lock()
		if t.h == nil {
			t.h = nats.Header{}
		}
		Set(t.h, name)
		t.mu.Unlock()
	}
}
