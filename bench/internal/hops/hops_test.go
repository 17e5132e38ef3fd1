package hops_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/internal/hops"
	"github.com/switchyard-mcp/switchyard/internal/hop"
)

const us = time.Microsecond

// full returns a complete set of stamps (ns since edge_in) as the gateway
// returns them once decoded from JSON: edge 10µs, bus 1 40µs, router 5µs,
// bus 2 35µs, worker before 8µs, upstream 150µs, worker after 7µs, bus 3
// 30µs, edge after 15µs; edge_out at 300µs.
func full() map[string]any {
	return map[string]any{
		hop.EdgeIn: 0.0, hop.EdgePub: 10e3, hop.RouterIn: 50e3, hop.RouterOut: 55e3, hop.WorkerIn: 90e3,
		hop.UpSent: 98e3, hop.UpRecv: 248e3, hop.WorkerOut: 255e3, hop.EdgeRecv: 285e3, hop.EdgeOut: 300e3,
	}
}

var fullSegments = []time.Duration{10 * us, 40 * us, 5 * us, 35 * us, 8 * us, 150 * us, 7 * us, 30 * us, 15 * us}

func without(m map[string]any, key string) map[string]any {
	m = maps.Clone(m)
	delete(m, key)
	return m
}

func with(m map[string]any, key string, v any) map[string]any {
	m = maps.Clone(m)
	m[key] = v
	return m
}

func TestHopsSegmentsInPathOrder(t *testing.T) {
	// Consecutive segments share a stamp and cover hop.Order end to end.
	var stamps []string
	for _, s := range hops.Segments {
		if s.Key == hops.OutsideKey {
			continue
		}
		if len(stamps) > 0 && stamps[len(stamps)-1] != s.From {
			t.Errorf("segment %s starts at %s, the previous one ended at %s", s.Key, s.From, stamps[len(stamps)-1])
		}
		if len(stamps) == 0 {
			stamps = append(stamps, s.From)
		}
		stamps = append(stamps, s.To)
	}
	if !slices.Equal(stamps, hop.Order) {
		t.Errorf("segments cover %v, want hop.Order %v", stamps, hop.Order)
	}
	if last := hops.Segments[len(hops.Segments)-1]; last.Key != hops.OutsideKey {
		t.Errorf("last segment is %q, want %q", last.Key, hops.OutsideKey)
	}
}

func TestHopsSplit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		meta     mcp.Meta
		observed time.Duration
		want     []time.Duration // nil: the call is skipped
	}{
		{
			name: "complete", meta: mcp.Meta{hops.MetaKey: full()}, observed: 420 * us,
			want: append(slices.Clone(fullSegments), 120*us),
		},
		{
			// Stamps are relative to edge_in, but shifted ones split the same.
			name: "shifted stamps", observed: 300 * us,
			meta: mcp.Meta{hops.MetaKey: func() map[string]any {
				m := full()
				for k, v := range m {
					m[k] = v.(float64) + 1e15
				}
				return m
			}()},
			want: append(slices.Clone(fullSegments), 0),
		},
		{
			name: "json.Number values", observed: 301 * us,
			meta: mcp.Meta{hops.MetaKey: func() map[string]any {
				m := full()
				for k, v := range m {
					b, _ := json.Marshal(v)
					m[k] = json.Number(b)
				}
				return m
			}()},
			want: append(slices.Clone(fullSegments), 1*us),
		},
		{
			name: "clock step makes a segment negative", observed: 400 * us,
			meta: mcp.Meta{hops.MetaKey: with(full(), hop.RouterIn, 5e3)},
			want: []time.Duration{10 * us, -5 * us, 50 * us, 35 * us, 8 * us, 150 * us, 7 * us, 30 * us, 15 * us, 100 * us},
		},
		{
			name: "route grant: no router stamps", observed: 400 * us,
			meta: mcp.Meta{hops.MetaKey: granted()},
			want: []time.Duration{10 * us, 80 * us, 0, 0, 8 * us, 150 * us, 7 * us, 30 * us, 15 * us, 100 * us},
		},
		{name: "missing router_out only", meta: mcp.Meta{hops.MetaKey: without(full(), hop.RouterOut)}, observed: 400 * us},
		{name: "missing router_in only", meta: mcp.Meta{hops.MetaKey: without(full(), hop.RouterIn)}, observed: 400 * us},
		{name: "missing up_sent", meta: mcp.Meta{hops.MetaKey: without(full(), hop.UpSent)}, observed: 400 * us},
		{name: "missing edge_in", meta: mcp.Meta{hops.MetaKey: without(full(), hop.EdgeIn)}, observed: 400 * us},
		{name: "missing edge_out", meta: mcp.Meta{hops.MetaKey: without(full(), hop.EdgeOut)}, observed: 400 * us},
		{name: "a stamp is not a number", meta: mcp.Meta{hops.MetaKey: with(full(), hop.WorkerIn, "90000")}, observed: 400 * us},
		{name: "a stamp is fractional", meta: mcp.Meta{hops.MetaKey: with(full(), hop.WorkerIn, 90000.5)}, observed: 400 * us},
		{name: "no timing in _meta", meta: mcp.Meta{"other": 1.0}, observed: 400 * us},
		{name: "timing is not an object", meta: mcp.Meta{hops.MetaKey: true}, observed: 400 * us},
		{name: "no _meta", meta: nil, observed: 400 * us},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]time.Duration, len(hops.Segments))
			st, ok := hops.Stamps(tc.meta)
			complete := ok && hops.Split(st, tc.observed, out)
			if complete != (tc.want != nil) {
				t.Fatalf("complete = %v, want %v (stamps %v)", complete, tc.want != nil, st)
			}
			if complete && !slices.Equal(out, tc.want) {
				t.Errorf("segments = %v, want %v", out, tc.want)
			}
			var sum time.Duration
			for _, d := range out {
				sum += d
			}
			if complete && sum != tc.observed {
				t.Errorf("segments add up to %v, want the observed %v", sum, tc.observed)
			}

			// The collector skips the incomplete call as a whole.
			c := hops.NewCollector(2)
			c.Add(mcp.Meta{hops.MetaKey: full()}, 300*us)
			c.Add(tc.meta, tc.observed)
			s := c.Summary()
			wantComplete := 1
			if complete {
				wantComplete = 2
			}
			if s.Calls != 2 || s.Complete != wantComplete || s.Missing != 2-wantComplete {
				t.Errorf("summary counts: calls %d complete %d missing %d, want 2 %d %d", s.Calls, s.Complete, s.Missing, wantComplete, 2-wantComplete)
			}
			if len(s.Segments) != len(hops.Segments) {
				t.Fatalf("%d segment results, want %d", len(s.Segments), len(hops.Segments))
			}
			if !complete {
				for i, r := range s.Segments[:len(fullSegments)] {
					if r.P50 != fullSegments[i] {
						t.Errorf("segment %s p50 = %v, want %v from the complete call alone", r.Key, r.P50, fullSegments[i])
					}
				}
			}
		})
	}
}

func TestHopsSummary(t *testing.T) {
	c := hops.NewCollector(3)
	if s := c.Summary(); s.Calls != 0 || len(s.Segments) != 0 || s.SumP50 != 0 {
		t.Errorf("empty summary = %+v", s)
	}
	// Three calls: the upstream segment is slow in one, bus 1 in another,
	// so the sum of medians (300µs) differs from the median of the sums.
	slowUp := full()
	for _, k := range []string{hop.UpRecv, hop.WorkerOut, hop.EdgeRecv, hop.EdgeOut} {
		slowUp[k] = slowUp[k].(float64) + 1000e3
	}
	slowBus := full()
	for _, k := range hop.Order[2:] {
		slowBus[k] = slowBus[k].(float64) + 500e3
	}
	c.Add(mcp.Meta{hops.MetaKey: full()}, 300*us)
	c.Add(mcp.Meta{hops.MetaKey: slowUp}, 1300*us)
	c.Add(mcp.Meta{hops.MetaKey: slowBus}, 800*us)
	c.Add(mcp.Meta{}, 100*us)
	s := c.Summary()
	if s.Calls != 4 || s.Complete != 3 || s.Missing != 1 {
		t.Errorf("counts = %+v", s)
	}
	if p, ok := s.P50("upstream"); !ok || p != 150*us {
		t.Errorf("upstream p50 = %v, %v", p, ok)
	}
	if p, ok := s.P50("bus1"); !ok || p != 40*us {
		t.Errorf("bus 1 p50 = %v, %v", p, ok)
	}
	if p, _ := s.P50("upstream"); s.Segments[5].P99 != 1150*us || p != 150*us {
		t.Errorf("upstream p99 = %v", s.Segments[5].P99)
	}
	if s.SumP50 != 300*us || s.ObservedP50 != 800*us {
		t.Errorf("sum of medians %v, median of sums %v; want 300µs and 800µs", s.SumP50, s.ObservedP50)
	}
	if _, ok := s.P50("nope"); ok {
		t.Error("P50 of an unknown segment")
	}
}

// granted returns full's stamps without the router's: a call the edge
// sent straight to the worker on a route grant (bus 1 80µs).
func granted() map[string]any { return without(without(full(), hop.RouterIn), hop.RouterOut) }

func TestHopsSummaryRouteGrants(t *testing.T) {
	// A granted call takes no time in the router and bus 2; counting its
	// zero in their medians would print "router 0.0 µs" as if the router
	// were free. They are over the routed calls alone, and the sum of the
	// medians leaves them out unless every call was routed.
	slowRouter := with(full(), hop.RouterOut, 60e3) // router 10µs, bus 2 30µs
	for _, tc := range []struct {
		name                    string
		calls                   []map[string]any
		routed, granted         int
		routerN                 int
		routerP50, bus2P50, sum time.Duration
	}{
		{
			name: "every call granted", calls: []map[string]any{granted(), granted(), granted()},
			granted: 3, sum: 10*us + 80*us + 8*us + 150*us + 7*us + 30*us + 15*us,
		},
		{
			name: "one call of three routed", calls: []map[string]any{granted(), full(), granted()},
			routed: 1, granted: 2, routerN: 1, routerP50: 5 * us, bus2P50: 35 * us,
			sum: 10*us + 80*us + 8*us + 150*us + 7*us + 30*us + 15*us, // bus 1's median is a granted call's
		},
		{
			name: "every call routed", calls: []map[string]any{full(), slowRouter, full()},
			routed: 3, routerN: 3, routerP50: 5 * us, bus2P50: 35 * us, sum: 300 * us,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hops.NewCollector(len(tc.calls))
			for _, st := range tc.calls {
				c.Add(mcp.Meta{hops.MetaKey: st}, 300*us) // outside 0
			}
			s := c.Summary()
			if s.Complete != len(tc.calls) || s.Routed != tc.routed || s.Granted != tc.granted {
				t.Errorf("complete %d routed %d granted %d, want %d %d %d", s.Complete, s.Routed, s.Granted, len(tc.calls), tc.routed, tc.granted)
			}
			for _, r := range s.Segments {
				want, wantP50 := s.Complete, r.P50
				switch r.Key {
				case "router":
					want, wantP50 = tc.routerN, tc.routerP50
				case "bus2":
					want, wantP50 = tc.routerN, tc.bus2P50
				}
				if r.N != want || r.P50 != wantP50 {
					t.Errorf("%s: over %d calls, p50 %v; want %d, %v", r.Key, r.N, r.P50, want, wantP50)
				}
			}
			if s.SumP50 != tc.sum || s.SumLeavesOutRouter() != (tc.granted > 0) {
				t.Errorf("sum of the medians %v (leaves out the router: %v), want %v (%v)", s.SumP50, s.SumLeavesOutRouter(), tc.sum, tc.granted > 0)
			}
		})
	}
}

func TestHopsRouted(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   map[string]any
		want bool
	}{
		{"router stamps", full(), true},
		{"route grant", granted(), false},
		{"router_out only", without(full(), hop.RouterIn), false},
	} {
		st, _ := hops.Stamps(mcp.Meta{hops.MetaKey: tc.st})
		if got := hops.Routed(st); got != tc.want {
			t.Errorf("%s: Routed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHopsRequestMeta(t *testing.T) {
	m := hops.RequestMeta()
	if m[hop.MetaKey] != true || len(m) != 1 {
		t.Errorf("RequestMeta = %v", m)
	}
	m["x"] = 1
	if len(hops.RequestMeta()) != 1 {
		t.Error("RequestMeta shares its map")
	}
}
