package sweep

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/mdtable"
	"github.com/switchyard-mcp/switchyard/bench/internal/svgplot"
)

// Comparison pairs the direct and gateway stages of one method, shape and
// connection count; either may be nil if it was not measured.
type Comparison struct {
	Conns           int
	Direct, Gateway *StageResult
}

// Retention returns gateway req/s divided by direct req/s, or 0 when either
// is missing or direct measured nothing. Measured in interleaved rounds,
// it is the median of the per-round ratios instead: a round's two slices
// ran under the same host load, the whole stages did not.
func (c Comparison) Retention() float64 {
	if c.Direct == nil || c.Gateway == nil {
		return 0
	}
	if len(c.Gateway.RoundRetention) > 0 {
		return c.Gateway.Retention
	}
	if c.Direct.ReqPerSec == 0 {
		return 0
	}
	return c.Gateway.ReqPerSec / c.Direct.ReqPerSec
}

// retentionCell formats c's retention, with the per-round range when
// measured in rounds: "0.66 (0.61–0.70)".
func (c Comparison) retentionCell() string {
	if c.Direct != nil && c.Gateway != nil && len(c.Gateway.RoundRetention) > 0 {
		return fmtRetention(c.Gateway.Retention, c.Gateway.RetentionMin, c.Gateway.RetentionMax)
	}
	return fmt.Sprintf("%.2f", c.Retention())
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
		if st.Side == SideGateway {
			c.Gateway = st
		} else {
			c.Direct = st
		}
	}
	return groups
}

// Markdown returns the report as a Markdown document: a header, then per
// group a table and links to its plots (as written by [Report.Plots]).
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
	b.WriteString(" CPU columns are µs of process CPU time per request (d = direct stage, g = gateway stage).\n")
	for _, g := range r.Groups() {
		fmt.Fprintf(&b, "\n## %s\n\n", g.Title())
		if g.Shape != "" {
			b.WriteString("Direct lists one of the upstreams, for reference; the gateway lists all of them.\n\n")
		}
		b.WriteString(groupTable(g).String())
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

// order describes how the direct and gateway stages were run.
func (r *Report) order() string {
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
			fmt.Sprintf("%.0f", d.ReqPerSec), fmt.Sprintf("%.0f", gw.ReqPerSec), c.retentionCell(),
			us(d.Latency.P50), us(d.Latency.P99), us(gw.Latency.P50), us(gw.Latency.P99),
			fmt.Sprintf("%d/%d", d.Errors, gw.Errors),
			cpu(gw.GatewayCPUPerCall),
			cpu(d.UpstreamCPUPerCall)+"/"+cpu(gw.UpstreamCPUPerCall),
			cpu(d.DriverCPUPerCall)+"/"+cpu(gw.DriverCPUPerCall))
	}
	return t
}

// firstErrors lists the first error of each stage that had errors.
func firstErrors(g Group) string {
	var b strings.Builder
	for _, c := range g.Rows {
		for _, st := range []*StageResult{c.Direct, c.Gateway} {
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
// gateway, both on a log-scale x axis.
func (r *Report) Plots() []Plot {
	var plots []Plot
	for _, g := range r.Groups() {
		var conns []float64
		for _, c := range g.Rows {
			conns = append(conns, float64(c.Conns))
		}
		x := svgplot.Axis{Label: "connections", Log: true, Ticks: conns}
		lat := &svgplot.Chart{
			Title: g.Title() + ": latency", X: x,
			Y: svgplot.Axis{Label: "latency", Log: true, Format: fmtMicros},
			Series: []svgplot.Series{
				series(g, SideDirect, "p50", p50), series(g, SideDirect, "p99", p99),
				series(g, SideGateway, "p50", p50), series(g, SideGateway, "p99", p99),
			},
		}
		thr := &svgplot.Chart{
			Title: g.Title() + ": throughput", X: x,
			Y:      svgplot.Axis{Label: "requests per second"},
			Series: []svgplot.Series{series(g, SideDirect, "", rps), series(g, SideGateway, "", rps)},
		}
		plots = append(plots, Plot{g.Slug() + "-latency.svg", lat}, Plot{g.Slug() + "-throughput.svg", thr})
	}
	return plots
}

func p50(s *StageResult) float64 { return micros(s.Latency.P50) }
func p99(s *StageResult) float64 { return micros(s.Latency.P99) }
func rps(s *StageResult) float64 { return s.ReqPerSec }

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// series builds the line "<side> <stat>" of a group: value of that side's
// stage at each connection count where it had successful requests. Direct
// is blue, gateway orange; p99 lines are dashed.
func series(g Group, side, stat string, value func(*StageResult) float64) svgplot.Series {
	s := svgplot.Series{Name: strings.TrimSpace(side + " " + stat), Color: "#1f77b4", Dashed: stat == "p99"}
	if side == SideGateway {
		s.Color = "#ff7f0e"
	}
	for _, c := range g.Rows {
		st := c.Direct
		if side == SideGateway {
			st = c.Gateway
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
