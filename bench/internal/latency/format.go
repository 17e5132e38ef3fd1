package latency

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/hops"
	"github.com/switchyard-mcp/switchyard/bench/internal/mdtable"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
	"github.com/switchyard-mcp/switchyard/internal/hop"
)

// BenchLine returns the one-line machine-readable summary CI greps for:
//
//	BENCH_RESULT mode=M protocol=V n=N direct_p50_us=.. direct_p99_us=.. gw_p50_us=.. gw_p90_us=.. gw_p99_us=.. added_p50_us=.. added_p99_us=..
//
// When the proxy side ran, proxy_p50_us, proxy_added_p50_us (proxy p50
// minus direct p50) and added_over_proxy_p50_us (gateway p50 minus proxy
// p50) follow those keys (which never change).
//
// When per-hop stamps were collected, extra keys follow: hops_n (calls with
// every stamp), hops_routed_n (those of them that went through a router;
// the others were sent on a route grant), hops_<segment>_p50_us for each
// segment in path order (edge, bus1, router, bus2, worker_before,
// upstream, worker_after, bus3, edge_after, outside) and hops_sum_p50_us,
// the sum of the medians. hops_router_p50_us and hops_bus2_p50_us are
// medians over the routed calls only, 0 when no call was routed (read
// them with hops_routed_n). The sum leaves those two out unless every call
// was routed (see [hops.Summary]); it approximates, but does not equal,
// the median of the per-call sums (the gateway's p50 over the same
// calls): a median is not additive, since the calls slow in one segment
// are not the ones slow in another.
//
// When the idle RSS of the gateway's processes was read (a cluster the
// driver started), idle_rss_max_kib, the largest VmRSS, comes last, then
// idle_rss_anon_max_kib, the largest RssAnon (the process's own memory,
// without the binary mapped from the page cache and shared by all of
// them); that key is left out when the kernel does not report RssAnon.
//
// Values are whole microseconds, truncated toward zero.
func (r *Result) BenchLine() string {
	line := fmt.Sprintf("BENCH_RESULT mode=%s protocol=%s n=%d direct_p50_us=%s direct_p99_us=%s gw_p50_us=%s gw_p90_us=%s gw_p99_us=%s added_p50_us=%s added_p99_us=%s",
		r.Mode, r.Protocol, r.N,
		us(r.Direct.Summary.P50), us(r.Direct.Summary.P99),
		us(r.Gateway.Summary.P50), us(r.Gateway.Summary.P90), us(r.Gateway.Summary.P99),
		us(r.AddedP50), us(r.AddedP99))
	if p := r.Proxy; p != nil {
		line += fmt.Sprintf(" proxy_p50_us=%s proxy_added_p50_us=%s added_over_proxy_p50_us=%s",
			us(p.Summary.P50), us(r.ProxyAddedP50), us(r.OverProxyP50))
	}
	if h := r.Hops; h != nil && h.Complete > 0 {
		var b strings.Builder
		b.WriteString(line)
		fmt.Fprintf(&b, " hops_n=%d hops_routed_n=%d", h.Complete, h.Routed)
		for _, sg := range h.Segments {
			fmt.Fprintf(&b, " hops_%s_p50_us=%s", sg.Key, us(sg.P50))
		}
		fmt.Fprintf(&b, " hops_sum_p50_us=%s", us(h.SumP50))
		line = b.String()
	}
	if r.IdleRSS != nil {
		line += fmt.Sprintf(" idle_rss_max_kib=%d", r.IdleRSS.MaxKiB())
		if a := r.IdleRSS.MaxAnonKiB(); a >= 0 {
			line += fmt.Sprintf(" idle_rss_anon_max_kib=%d", a)
		}
	}
	return line
}

// WriteText writes a short human-readable report (percentiles per side and
// the added latency, in microseconds) to w.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "latency: mode=%s protocol=%s n=%d warmup=%d (%.1fs)\n", r.Mode, r.Protocol, r.N, r.Warmup, r.Elapsed.Seconds())
	for _, s := range r.namedSides() {
		m := s.side.Summary
		fmt.Fprintf(&b, "  %-8s p50 %7dµs  p90 %7dµs  p99 %7dµs  max %7dµs  errors %d  (%s, %s)\n",
			s.name, m.P50.Microseconds(), m.P90.Microseconds(), m.P99.Microseconds(), m.Max.Microseconds(),
			s.side.Errors, s.side.Tool, s.side.Protocol)
	}
	fmt.Fprintf(&b, "  added    p50 %7dµs  p99 %7dµs", r.AddedP50.Microseconds(), r.AddedP99.Microseconds())
	if r.GatewayCPUPerCall != nil {
		fmt.Fprintf(&b, "  gateway CPU %.0fµs/call", *r.GatewayCPUPerCall)
	}
	b.WriteString("\n")
	if r.Proxy != nil {
		fmt.Fprintf(&b, "  added over the proxy p50 %7dµs  (the proxy itself adds p50 %dµs)\n", r.OverProxyP50.Microseconds(), r.ProxyAddedP50.Microseconds())
	}
	if h := r.Hops; h != nil {
		if h.Complete == 0 {
			fmt.Fprintf(&b, "  hops: none of %d gateway calls returned complete stamps (does the gateway support %s?)\n", h.Calls, hops.MetaKey)
		} else {
			fmt.Fprintf(&b, "  hops: medians over the %d gateway calls with every stamp (%d without): %s\n", h.Complete, h.Missing, routedText(h))
			for _, sg := range h.Segments {
				switch {
				case sg.RoutedOnly && sg.N == 0:
					fmt.Fprintf(&b, "    %-34s %9s\n", sg.Name, noneRouted)
				case sg.RoutedOnly && sg.N < h.Complete:
					fmt.Fprintf(&b, "    %-34s %9s µs  (over the %d routed calls)\n", sg.Name, us1(sg.P50), sg.N)
				default:
					fmt.Fprintf(&b, "    %-34s %9s µs\n", sg.Name, us1(sg.P50))
				}
			}
			left := ""
			if h.SumLeavesOutRouter() {
				left = "without router and bus 2; "
			}
			fmt.Fprintf(&b, "    %-34s %9s µs  (%smedian of the sums, i.e. gateway p50 of those calls: %s µs)\n", "sum of the medians", us1(h.SumP50), left, us1(h.ObservedP50))
			fmt.Fprintf(&b, "    %-34s %9s µs\n", "direct call (for comparison)", us1(r.Direct.Summary.P50))
		}
	}
	if r.IdleRSS != nil {
		fmt.Fprintf(&b, "  %s\n", r.IdleRSS.Text())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Markdown returns the result as a Markdown section: a table with one row
// per side plus the added latency, in microseconds. When the proxy side
// ran, its row comes between direct and gateway, and two rows follow the
// added one: the proxy's p50 over direct and the gateway's over the proxy.
func (r *Result) Markdown() string {
	t := mdtable.Table{
		Header: []string{"side", "tool", "protocol", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "mean µs", "errors"},
		Right:  []bool{false, false, false, true, true, true, true, true, true, true},
	}
	row := func(name string, s Side) {
		cells := append([]string{name, s.Tool, s.Protocol}, micros(s.Summary)...)
		t.AddRow(append(cells, strconv.Itoa(s.Errors))...)
	}
	for _, s := range r.namedSides() {
		row(s.name, *s.side)
	}
	t.AddRow("added", "", "", us(r.AddedP50), "", us(r.AddedP99))
	if r.Proxy != nil {
		t.AddRow("added by the proxy", "", "", us(r.ProxyAddedP50))
		t.AddRow("added over the proxy", "", "", us(r.OverProxyP50))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Latency gate: mode=%s protocol=%s\n\n", r.Mode, r.Protocol)
	sessions := "one session per side"
	if n := len(r.Gateway.URLs); n > 1 {
		others := "the direct side"
		if r.Proxy != nil {
			others = "the direct and the proxy side"
		}
		sessions = fmt.Sprintf("one session on %s, one per edge (%d) on the gateway side, calls rotating over them", others, n)
	}
	fmt.Fprintf(&b, "%s, n=%d per side after %d warmup calls, interleaved on %s.\n\n",
		r.Start.UTC().Format(time.RFC3339), r.N, r.Warmup, sessions)
	b.WriteString(t.String())
	fmt.Fprintf(&b, "\nHost: %s.", r.Host)
	if r.Topology != nil {
		fmt.Fprintf(&b, " Cluster: %s, one NATS server and one tenancy-svc; gateway CPU sums all of them.", r.Topology)
		if r.GatewayLogs != "" {
			fmt.Fprintf(&b, " Logs and configuration: `%s`.", r.GatewayLogs)
		}
	}
	if r.GOGC != "" {
		fmt.Fprintf(&b, " Gateway GOGC=%s.", r.GOGC)
	}
	if r.GOMAXPROCS != "" {
		fmt.Fprintf(&b, " GOMAXPROCS=%s in every gateway process.", r.GOMAXPROCS)
	}
	if r.GatewayCPUPerCall != nil {
		fmt.Fprintf(&b, " Gateway CPU: %.1f µs per call.", *r.GatewayCPUPerCall)
	}
	if r.Proxy != nil {
		b.WriteString(" The proxy side goes through a minimal reverse proxy process (httputil.ReverseProxy) in front of the same upstream: the floor any gateway process adds on this machine.")
		if r.GOGC != "" { // the driver started the gateway, and so the proxy
			b.WriteString(" The driver started it with the gateway's GOGC and GOMAXPROCS.")
		}
	}
	b.WriteString("\n")
	if r.IdleRSS != nil {
		fmt.Fprintf(&b, "\n### Idle RSS per gateway process\n\nVmRSS from /proc/<pid>/status, %v after the cluster was ready, before any call; %s\n\n%s", r.IdleRSS.After, report.MarkdownNote, r.IdleRSS.Markdown())
	}
	if r.Hops != nil {
		b.WriteString(r.hopsMarkdown())
	}
	return b.String()
}

// hopsMarkdown returns the per-hop section.
func (r *Result) hopsMarkdown() string {
	h := r.Hops
	var b strings.Builder
	b.WriteString("\n### Per-hop attribution (gateway side)\n\n")
	if h.Complete == 0 {
		fmt.Fprintf(&b, "None of the %d measured gateway calls returned complete stamps in `_meta[%q]`.\n", h.Calls, hops.MetaKey)
		return b.String()
	}
	fmt.Fprintf(&b, "Every gateway call asked for per-hop stamps (`_meta: {%q: true}`). Medians over the %d measured calls that returned every stamp (%d did not and are left out of every segment). "+
		"Of those, %s. "+
		"A call on a route grant goes from the edge straight to a worker (docs/architecture.md, Calls step 2): it has no router stamps, its bus 1 ends at the worker, and it is left out of the router and bus 2 rows, which are over the routed calls only. "+
		"\"Outside the stamps\" is the client-observed latency minus edge_out − edge_in: the client, HTTP and the go-sdk server's work at the edge. "+
		"The stamps come from different processes' wall clocks (one machine). "+
		"The sum of the medians approximates, but does not equal, the median of the per-call sums (a median is not additive)%s.\n\n",
		hops.MetaKey, h.Complete, h.Missing, routedText(h), sumNote(h))
	t := mdtable.Table{
		Header: []string{"segment", "from → to", "calls", "p50 µs", "p90 µs", "p99 µs"},
		Right:  []bool{false, false, true, true, true, true},
	}
	for _, sg := range h.Segments {
		span := sg.From + " → " + sg.To
		switch {
		case sg.Key == hops.OutsideKey:
			span = "observed − (edge_out − edge_in)"
		case sg.To == hop.RouterIn && h.Granted > 0:
			span += ", or worker_in on a grant" // bus 1: see hops.Split
		}
		if sg.RoutedOnly && sg.N == 0 {
			t.AddRow(sg.Name, span, "0", noneRouted)
			continue
		}
		t.AddRow(sg.Name, span, strconv.Itoa(sg.N), us1(sg.P50), us1(sg.P90), us1(sg.P99))
	}
	span := ""
	if h.SumLeavesOutRouter() {
		span = "without router and bus 2"
	}
	t.AddRow("sum of the medians", span, strconv.Itoa(h.Complete), us1(h.SumP50))
	t.AddRow("median of the sums", "gateway p50 of these calls", strconv.Itoa(h.Complete), us1(h.ObservedP50))
	t.AddRow("direct call", "the upstream without the gateway", strconv.Itoa(r.Direct.Summary.N), us1(r.Direct.Summary.P50), us1(r.Direct.Summary.P90), us1(r.Direct.Summary.P99))
	b.WriteString(t.String())
	return b.String()
}

// noneRouted stands for the router and bus 2 medians when every call was
// sent on a route grant: a 0.0 there would read as a free router.
const noneRouted = "n/a (no call routed)"

// routedText says how the complete calls of h went: "3 through a router,
// 1987 on a route grant".
func routedText(h *hops.Summary) string {
	return fmt.Sprintf("%d through a router, %d on a route grant", h.Routed, h.Granted)
}

// sumNote explains, when it does, why the sum of the medians leaves the
// router and bus 2 out.
func sumNote(h *hops.Summary) string {
	if !h.SumLeavesOutRouter() {
		return ""
	}
	return "; it leaves out the router and bus 2, which the calls on a route grant do not pass, so that it adds up segments every call has"
}

// us1 formats d in microseconds with one decimal.
func us1(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 1, 64)
}

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// micros returns p50, p90, p99, p99.9, max and mean in microseconds.
func micros(m stats.Summary) []string {
	return []string{us(m.P50), us(m.P90), us(m.P99), us(m.P999), us(m.Max), us(m.Mean)}
}
