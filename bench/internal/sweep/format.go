package sweep

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/mdtable"
	"github.com/switchyard-mcp/switchyard/bench/internal/svgplot"
)

// Comparison gathers the direct, proxy and gateway stages of one method,
// shape and connection count; each may be nil if it was not measured
// (Proxy is nil without a proxy side).
type Comparison struct {
	Conns                  int
	Direct, Proxy, Gateway *StageResult
}

// Retention returns gateway req/s divided by direct req/s, or 0 when either
// is missing or direct measured nothing. Measured in interleaved rounds,
// it is the median of the per-round ratios instead: a round's slices ran
// under the same host load, the whole stages did not.
func (c Comparison) Retention() float64 { return c.retention(c.Gateway) }

// ProxyRetention is [Comparison.Retention] for the proxy side: proxy
// req/s over direct req/s.
func (c Comparison) ProxyRetention() float64 { return c.retention(c.Proxy) }

// retention returns side's req/s over direct's (see Retention).
func (c Comparison) retention(side *StageResult) float64 {
	if c.Direct == nil || side == nil {
		return 0
	}
	if len(side.RoundRetention) > 0 {
		return side.Retention
	}
	if c.Direct.ReqPerSec == 0 {
		return 0
	}
	return side.ReqPerSec / c.Direct.ReqPerSec
}

// retentionCell formats side's retention against direct, with the
// per-round range when measured in rounds: "0.66 (0.61–0.70)".
func (c Comparison) retentionCell(side *StageResult) string {
	if c.Direct != nil && side != nil && len(side.RoundRetention) > 0 {
		return fmtRetention(side.Retention, side.RetentionMin, side.RetentionMax)
	}
	return fmt.Sprintf("%.2f", c.retention(side))
}

// fmtRetention formats a median retention and its range.
func fmtRetention(median, lo, hi float64) string {
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median, lo, hi)
}

// Group is the comparisons of one method (and federation shape), by
// connection count in the order measured.
type Group struct {
	Method string
	Shape  string
	Rows   []Comparison
}

// HasProxy reports whether any of g's comparisons has a proxy stage.
func (g Group) HasProxy() bool {
	return slices.ContainsFunc(g.Rows, func(c Comparison) bool { return c.Proxy != nil })
}

// Slug names the group's files: "tools_call", "tools_list",
// "federation-5x20".
func (g Group) Slug() string {
	if g.Shape != "" {
		return "federation-" + g.Shape
	}
	return strings.ReplaceAll(g.Method, "/", "_")
}

// Title describes the group.
func (g Group) Title() string {
	if g.Shape == "" {
		return g.Method
	}
	return fmt.Sprintf("%s, federation %s", g.Method, g.Shape)
}

// Groups returns the report's stages paired into comparisons, grouped by
// method and shape in the order they were measured.
func (r *Report) Groups() []Group {
	var groups []Group
	for i := range r.Stages {
		st := &r.Stages[i]
		gi := len(groups) - 1
		if gi < 0 || groups[gi].Method != st.Method || groups[gi].Shape != st.Shape {
			groups = append(groups, Group{Method: st.Method, Shape: st.Shape})
			gi++
		}
		g := &groups[gi]
		if len(g.Rows) == 0 || g.Rows[len(g.Rows)-1].Conns != st.Conns {
			g.Rows = append(g.Rows, Comparison{Conns: st.Conns})
		}
		c := &g.Rows[len(g.Rows)-1]
		switch st.Side {
		case SideGateway:
			c.Gateway = st
		case SideProxy:
			c.Proxy = st
		default:
			c.Direct = st
		}
	}
	return groups
}

// Markdown returns the report as a Markdown document: a header, then per
// group a table, the proxy's table when the group has a proxy side, and
// links to its plots (as written by [Report.Plots]).
func (r *Report) Markdown() string {
	var b strings.Builder
	b.WriteString("# Switchyard concurrency sweep\n\n")
	fmt.Fprintf(&b, "%s, mode=%s, protocol=%s; %s; each connection is one go-sdk client session making sequential requests; %s.\n\n",
		r.Start.UTC().Format(time.RFC3339), r.Mode, r.Protocol, r.timing(), r.order())
	fmt.Fprintf(&b, "Host: %s.", r.Host)
	if r.Topology != nil {
		fmt.Fprintf(&b, " Cluster: %s, one NATS server and one tenancy-svc; connections spread round robin over the edges; gateway CPU sums every gateway process, NATS included.", r.Topology)
	}
	if r.GOGC != "" {
		fmt.Fprintf(&b, " Gateway GOGC=%s.", r.GOGC)
	}
	if r.GOMAXPROCS != "" {
		fmt.Fprintf(&b, " GOMAXPROCS=%s in every gateway process.", r.GOMAXPROCS)
	}
	b.WriteString(" CPU columns are µs of process CPU time per request (d = direct stage, g = gateway stage).")
	if r.hasProxy() {
		b.WriteString(r.proxyNote())
	}
	b.WriteString("\n")
	for _, g := range r.Groups() {
		fmt.Fprintf(&b, "\n## %s\n\n", g.Title())
		if g.Shape != "" {
			b.WriteString("Direct lists one of the upstreams, for reference; the gateway lists all of them.\n\n")
		}
		b.WriteString(groupTable(g).String())
		if g.HasProxy() {
			b.WriteString("\n### The floor: a bare reverse proxy (`bench proxy`)\n\n")
			b.WriteString(proxyTable(g).String())
		}
		b.WriteString(firstErrors(g))
		fmt.Fprintf(&b, "\n![%s latency](%s-latency.svg)\n![%s throughput](%s-throughput.svg)\n", g.Title(), g.Slug(), g.Title(), g.Slug())
	}
	return b.String()
}

// timing describes the warmup and measured time of each stage.
func (r *Report) timing() string {
	if r.Rounds > 1 {
		return fmt.Sprintf("per side %v measured in %d slices of %v, each after a %v warmup",
			r.Duration, r.Rounds, r.Duration/time.Duration(r.Rounds), r.Warmup)
	}
	return fmt.Sprintf("per stage %v warmup + %v measured", r.Warmup, r.Duration)
}

// hasProxy reports whether r has proxy stages.
func (r *Report) hasProxy() bool {
	return slices.ContainsFunc(r.Stages, func(st StageResult) bool { return st.Side == SideProxy })
}

// proxyNote describes the proxy side, for the header.
func (r *Report) proxyNote() string {
	s := " The proxy side calls the direct upstream through `bench proxy`, a bare reverse proxy (httputil.ReverseProxy) in its own process"
	if r.GOGC != "" { // the driver started the gateway, and so the proxy
		s += ", started with the gateway's GOGC and GOMAXPROCS"
	}
	s += ": what a minimal proxy process keeps of direct throughput and the CPU it spends per request, the floor any gateway pays on this machine; " +
		"its CPU column is the proxy process's."
	if slices.ContainsFunc(r.Stages, func(st StageResult) bool { return st.Shape != "" }) {
		s += " The federation shapes have no proxy side (their gateway lists all upstreams' tools)."
	}
	return s
}

// order describes how the stages were run.
func (r *Report) order() string {
	if r.hasProxy() {
		if r.Rounds > 1 {
			return fmt.Sprintf("direct, proxy and gateway interleaved in %d rounds (a direct slice, a proxy slice, then a gateway slice, each after its own warmup; "+
				"each side's sessions stay open, idle while the others run); retention is the median of the "+
				"per-round ratios to the direct slice of the same round (gateway/direct, proxy/direct), their range in brackets", r.Rounds)
		}
		return "direct, proxy and gateway stages run one after the other"
	}
	if r.Rounds > 1 {
		return fmt.Sprintf("direct and gateway interleaved in %d rounds (a direct slice, then a gateway slice, each after its own warmup; "+
			"each side's sessions stay open, idle while the other side runs); retention is the median of the "+
			"per-round gateway/direct ratios, their range in brackets", r.Rounds)
	}
	return "direct and gateway stages run one after the other"
}

func groupTable(g Group) *mdtable.Table {
	t := &mdtable.Table{
		Header: []string{"conns", "direct req/s", "gw req/s", "retention", "direct p50 µs", "direct p99 µs",
			"gw p50 µs", "gw p99 µs", "errors d/g", "gw CPU", "upstream CPU d/g", "driver CPU d/g"},
		Right: []bool{true, true, true, true, true, true, true, true, true, true, true, true},
	}
	for _, c := range g.Rows {
		d, gw := orEmpty(c.Direct), orEmpty(c.Gateway)
		t.AddRow(strconv.Itoa(c.Conns),
			fmt.Sprintf("%.0f", d.ReqPerSec), fmt.Sprintf("%.0f", gw.ReqPerSec), c.retentionCell(c.Gateway),
			us(d.Latency.P50), us(d.Latency.P99), us(gw.Latency.P50), us(gw.Latency.P99),
			fmt.Sprintf("%d/%d", d.Errors, gw.Errors),
			cpu(gw.GatewayCPUPerCall),
			cpu(d.UpstreamCPUPerCall)+"/"+cpu(gw.UpstreamCPUPerCall),
			cpu(d.DriverCPUPerCall)+"/"+cpu(gw.DriverCPUPerCall))
	}
	return t
}

// proxyTable is g's proxy side: what the proxy keeps of direct
// throughput, its latency and CPU, and the gateway's CPU above it.
func proxyTable(g Group) *mdtable.Table {
	t := &mdtable.Table{
		Header: []string{"conns", "proxy req/s", "proxy retention", "proxy p50 µs", "proxy p99 µs", "errors",
			"proxy CPU", "gw CPU over proxy"},
		Right: []bool{true, true, true, true, true, true, true, true},
	}
	for _, c := range g.Rows {
		p := orEmpty(c.Proxy)
		t.AddRow(strconv.Itoa(c.Conns),
			fmt.Sprintf("%.0f", p.ReqPerSec), c.retentionCell(c.Proxy), us(p.Latency.P50), us(p.Latency.P99),
			strconv.Itoa(p.Errors), cpu(p.ProxyCPUPerCall), cpuOver(orEmpty(c.Gateway).GatewayCPUPerCall, p.ProxyCPUPerCall))
	}
	return t
}

// cpuOver formats a minus b, signed ("+120"), or "-" if either is unknown.
func cpuOver(a, b *float64) string {
	if a == nil || b == nil {
		return "-"
	}
	return fmt.Sprintf("%+.0f", *a-*b)
}

// firstErrors lists the first error of each stage that had errors.
func firstErrors(g Group) string {
	var b strings.Builder
	for _, c := range g.Rows {
		for _, st := range []*StageResult{c.Direct, c.Proxy, c.Gateway} {
			if st != nil && st.FirstError != "" {
				fmt.Fprintf(&b, "- %s c=%d: %d errors, first: `%s`\n", st.Side, st.Conns, st.Errors, st.FirstError)
			}
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nErrors:\n\n" + b.String()
}

func orEmpty(s *StageResult) *StageResult {
	if s == nil {
		return &StageResult{}
	}
	return s
}

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

func cpu(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *v)
}

// fmtMicros formats a value in microseconds for axes and console lines:
// "850µs", "1.2ms", "15ms", "2.5s".
func fmtMicros(v float64) string {
	switch {
	case v >= 1e6:
		return short(v/1e6) + "s"
	case v >= 1e3:
		return short(v/1e3) + "ms"
	}
	return short(v) + "µs"
}

// short formats v with three significant digits, never in exponent form.
func short(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// Plot is one SVG file of a report.
type Plot struct {
	// Name is the file name, "<group slug>-latency.svg" or
	// "<group slug>-throughput.svg".
	Name  string
	Chart *svgplot.Chart
}

// Plots returns two charts per group: p50 and p99 latency against
// connections, and req/s against connections, direct vs through the
// gateway (and through the proxy when the group has a proxy side), both
// on a log-scale x axis.
func (r *Report) Plots() []Plot {
	var plots []Plot
	for _, g := range r.Groups() {
		var conns []float64
		for _, c := range g.Rows {
			conns = append(conns, float64(c.Conns))
		}
		sides := []string{SideDirect, SideGateway}
		if g.HasProxy() {
			sides = []string{SideDirect, SideProxy, SideGateway}
		}
		x := svgplot.Axis{Label: "connections", Log: true, Ticks: conns}
		lat := &svgplot.Chart{
			Title: g.Title() + ": latency", X: x,
			Y: svgplot.Axis{Label: "latency", Log: true, Format: fmtMicros},
		}
		thr := &svgplot.Chart{
			Title: g.Title() + ": throughput", X: x,
			Y: svgplot.Axis{Label: "requests per second"},
		}
		for _, side := range sides {
			lat.Series = append(lat.Series, series(g, side, "p50", p50), series(g, side, "p99", p99))
			thr.Series = append(thr.Series, series(g, side, "", rps))
		}
		plots = append(plots, Plot{g.Slug() + "-latency.svg", lat}, Plot{g.Slug() + "-throughput.svg", thr})
	}
	return plots
}

func p50(s *StageResult) float64 { return micros(s.Latency.P50) }
func p99(s *StageResult) float64 { return micros(s.Latency.P99) }
func rps(s *StageResult) float64 { return s.ReqPerSec }

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// sideColor returns the plots' colour of side.
func sideColor(side string) string {
	switch side {
	case SideGateway:
		return "#ff7f0e"
	case SideProxy:
		return "#2ca02c"
	}
	return "#1f77b4"
}

// series builds the line "<side> <stat>" of a group: value of that side's
// stage at each connection count where it had successful requests. Direct
// is blue, the proxy green, the gateway orange; p99 lines are dashed.
func series(g Group, side, stat string, value func(*StageResult) float64) svgplot.Series {
	s := svgplot.Series{Name: strings.TrimSpace(side + " " + stat), Color: sideColor(side), Dashed: stat == "p99"}
	for _, c := range g.Rows {
		st := c.Direct
		switch side {
		case SideGateway:
			st = c.Gateway
		case SideProxy:
			st = c.Proxy
		}
		if st != nil && st.Requests > 0 {
			s.Points = append(s.Points, svgplot.Point{X: float64(c.Conns), Y: value(st)})
		}
	}
	return s
}

// SVG renders p's chart.
func (p Plot) SVG() ([]byte, error) {
	var b bytes.Buffer
	err := p.Chart.WriteSVG(&b)
	return b.Bytes(), err
}
