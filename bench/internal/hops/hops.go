// Package hops attributes a traced tools/call's latency to the hops of its
// path through Switchyard.
//
// A client asks for per-hop stamps with _meta {"dev.switchyard/timing":
// true} on tools/call; the gateway then returns, in the result's
// _meta["dev.switchyard/timing"], an object of stamps in nanoseconds since
// edge_in (see package github.com/switchyard-mcp/switchyard/internal/hop).
// [Split] turns one call's stamps into [Segments]; a [Collector] gathers
// them over many calls and [Collector.Summary] reports each segment's
// median.
package hops

import (
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
	"github.com/switchyard-mcp/switchyard/internal/hop"
)

// MetaKey is the _meta key that asks for stamps and carries them back.
const MetaKey = hop.MetaKey

// RequestMeta returns the _meta of a traced tools/call. Each call returns a
// new map, so ops may keep theirs.
func RequestMeta() mcp.Meta { return mcp.Meta{MetaKey: true} }

// Segment is one part of a traced call's latency: the time from stamp From
// to stamp To. The last segment, [Outside], has no stamps: it is what the
// client observed minus edge_out - edge_in.
type Segment struct {
	// Key names the segment in JSON and in BENCH_RESULT keys.
	Key string `json:"key"`
	// Name is for people.
	Name string `json:"name"`
	// From and To are stamp names; both empty for Outside.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// RoutedOnly marks the segments only a call through a router has
	// (router, bus 2): a call sent on a route grant skips them, so their
	// statistics are over the routed calls alone (see [Summary]).
	RoutedOnly bool `json:"routed_only,omitempty"`
}

// OutsideKey is the key of the last segment: the client-observed latency
// minus edge_out - edge_in, i.e. the client, HTTP and the go-sdk server's
// work at the edge before the middleware and after the result is
// marshalled.
const OutsideKey = "outside"

// Segments are the parts of a call, in path order. Bus 1 runs from the
// edge to the router, or to the worker for a call sent on a route grant
// (see Split). Together they add up to
// the client-observed latency of the call exactly.
var Segments = []Segment{
	{Key: "edge", Name: "edge", From: hop.EdgeIn, To: hop.EdgePub},
	{Key: "bus1", Name: "bus 1 (edge→router/worker)", From: hop.EdgePub, To: hop.RouterIn},
	{Key: "router", Name: "router", From: hop.RouterIn, To: hop.RouterOut, RoutedOnly: true},
	{Key: "bus2", Name: "bus 2 (router→worker)", From: hop.RouterOut, To: hop.WorkerIn, RoutedOnly: true},
	{Key: "worker_before", Name: "worker before", From: hop.WorkerIn, To: hop.UpSent},
	{Key: "upstream", Name: "upstream (incl. worker's client)", From: hop.UpSent, To: hop.UpRecv},
	{Key: "worker_after", Name: "worker after", From: hop.UpRecv, To: hop.WorkerOut},
	{Key: "bus3", Name: "bus 3 (worker→edge)", From: hop.WorkerOut, To: hop.EdgeRecv},
	{Key: "edge_after", Name: "edge after", From: hop.EdgeRecv, To: hop.EdgeOut},
	{Key: OutsideKey, Name: "outside the stamps", From: "", To: ""},
}

// Stamps returns the stamps in a result's _meta, by name. ok is false when
// there are none or they are not an object of numbers; a stamp whose value
// is not a number is left out (and so counts as missing).
func Stamps(meta mcp.Meta) (st map[string]int64, ok bool) {
	obj, ok := meta[MetaKey].(map[string]any)
	if !ok {
		return nil, false
	}
	st = make(map[string]int64, len(obj))
	for k, v := range obj {
		switch n := v.(type) {
		case float64: // what encoding/json gives; nanoseconds since edge_in stay below 2^53
			if n == math.Trunc(n) {
				st[k] = int64(n)
			}
		case json.Number:
			if i, err := n.Int64(); err == nil {
				st[k] = i
			}
		case int64:
			st[k] = n
		case int:
			st[k] = int64(n)
		}
	}
	return st, true
}

// Split writes the duration of each of [Segments] for one call into out
// (which must have len(Segments) elements) and reports whether every stamp
// was present. observed is the latency the client saw. When a stamp is
// missing, out is left in an unspecified state and the call should be
// skipped as a whole, so that every segment's median is over the same
// calls.
//
// A call the edge sent straight to a worker on a route grant has no router
// stamps: its bus 1 runs from the edge to the worker, and the router and
// bus 2 take no time (so that the segments still add up to observed); see
// [Routed].
func Split(st map[string]int64, observed time.Duration, out []time.Duration) bool {
	_, in := st[hop.RouterIn]
	_, routed := st[hop.RouterOut]
	w, granted := st[hop.WorkerIn]
	granted = granted && !in && !routed
	stamp := func(name string) (int64, bool) {
		if granted && (name == hop.RouterIn || name == hop.RouterOut) {
			return w, true
		}
		v, ok := st[name]
		return v, ok
	}
	for i, s := range Segments {
		if s.Key == OutsideKey {
			in, ok1 := st[hop.EdgeIn]
			o, ok2 := st[hop.EdgeOut]
			if !ok1 || !ok2 {
				return false
			}
			out[i] = observed - time.Duration(o-in)
			continue
		}
		from, ok1 := stamp(s.From)
		to, ok2 := stamp(s.To)
		if !ok1 || !ok2 {
			return false
		}
		out[i] = time.Duration(to - from)
	}
	return true
}

// Routed reports whether the stamps st are those of a call that went
// through a router (it has router_in and router_out). A complete call
// ([Split] true) that was not routed was sent on a route grant.
func Routed(st map[string]int64) bool {
	_, in := st[hop.RouterIn]
	_, out := st[hop.RouterOut]
	return in && out
}

// Collector gathers the segments of many calls. It is not safe for
// concurrent use.
type Collector struct {
	calls, missing int
	routed         int               // complete calls that went through a router
	segs           [][]time.Duration // by segment, then call (RoutedOnly segments: routed calls only)
	observed       []time.Duration   // client-observed latency of the complete calls
	scratch        []time.Duration
}

// NewCollector returns a collector with room for n calls.
func NewCollector(n int) *Collector {
	c := &Collector{segs: make([][]time.Duration, len(Segments)), scratch: make([]time.Duration, len(Segments))}
	for i := range c.segs {
		c.segs[i] = make([]time.Duration, 0, n)
	}
	c.observed = make([]time.Duration, 0, n)
	return c
}

// Add records one successful call: the result's _meta and the latency the
// client observed. A call without complete stamps is counted as missing
// and contributes to no segment; a call on a route grant contributes to
// every segment but the [Segment.RoutedOnly] ones, whose zero would say
// nothing about the router.
func (c *Collector) Add(meta mcp.Meta, observed time.Duration) {
	c.calls++
	st, ok := Stamps(meta)
	if !ok || !Split(st, observed, c.scratch) {
		c.missing++
		return
	}
	routed := Routed(st)
	if routed {
		c.routed++
	}
	for i, d := range c.scratch {
		if Segments[i].RoutedOnly && !routed {
			continue
		}
		c.segs[i] = append(c.segs[i], d)
	}
	c.observed = append(c.observed, observed)
}

// SegmentResult is one segment's statistics.
type SegmentResult struct {
	Segment
	// N is the number of calls the percentiles are over: the complete
	// calls, or for a RoutedOnly segment the routed ones. With N == 0
	// (no call was routed) the percentiles are zero and mean nothing.
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
}

// Summary is what a [Collector] gathered.
type Summary struct {
	// Calls is the number of calls added, Complete those with every stamp,
	// Missing the others (no _meta timing, or a stamp missing).
	Calls    int `json:"calls"`
	Complete int `json:"complete"`
	Missing  int `json:"missing"`
	// Routed counts the complete calls that went through a router,
	// Granted those the edge sent straight to a worker on a route grant
	// (no router stamps); Routed + Granted = Complete.
	Routed  int `json:"routed"`
	Granted int `json:"granted"`
	// Segments are in the order of [Segments].
	Segments []SegmentResult `json:"segments"`
	// SumP50 is the sum of the medians of the segments over every complete
	// call: when some calls were sent on a route grant (Granted > 0), the
	// RoutedOnly segments, whose medians are over the routed calls only,
	// are left out (see [Summary.SumLeavesOutRouter]). The median is not
	// additive: the median of per-call sums (ObservedP50, since the
	// segments of a call add up to its observed latency) is in general
	// not the sum of the medians, because the calls that are slow in one
	// segment are not the ones that are slow in another. SumP50 therefore
	// approximates ObservedP50; it is close when the segments vary little
	// or independently, and the gap says how much the tails move around.
	SumP50 time.Duration `json:"sum_of_p50_ns"`
	// ObservedP50 is the median client-observed latency of the complete
	// calls, i.e. the median of the sums.
	ObservedP50 time.Duration `json:"observed_p50_ns"`
}

// SumLeavesOutRouter reports whether SumP50 leaves out the RoutedOnly
// segments, i.e. whether some complete call was sent on a route grant.
func (s *Summary) SumLeavesOutRouter() bool { return s.Granted > 0 }

// Summary returns the medians (and p90, p99) of every segment over the
// complete calls (the RoutedOnly ones over the routed calls). With no
// complete calls, Segments is empty.
func (c *Collector) Summary() Summary {
	s := Summary{Calls: c.calls, Missing: c.missing, Complete: len(c.observed), Routed: c.routed}
	s.Granted = s.Complete - s.Routed
	if s.Complete == 0 {
		return s
	}
	for i, seg := range Segments {
		sorted := slices.Clone(c.segs[i])
		slices.Sort(sorted)
		r := SegmentResult{
			Segment: seg,
			N:       len(sorted),
			P50:     stats.Percentile(sorted, 50),
			P90:     stats.Percentile(sorted, 90),
			P99:     stats.Percentile(sorted, 99),
		}
		s.Segments = append(s.Segments, r)
		if r.N == s.Complete {
			s.SumP50 += r.P50
		}
	}
	obs := slices.Clone(c.observed)
	slices.Sort(obs)
	s.ObservedP50 = stats.Percentile(obs, 50)
	return s
}

// P50 returns the median of the segment with key, and whether it is there.
func (s *Summary) P50(key string) (time.Duration, bool) {
	for _, r := range s.Segments {
		if r.Key == key {
			return r.P50, true
		}
	}
	return 0, false
}
