package scale

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/mdtable"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/svgplot"
	"github.com/switchyard-mcp/switchyard/bench/internal/sweep"
)

// PlotName is the file name of the throughput chart.
const PlotName = "scale-throughput.svg"

// VerdictLine says how the ratio at the target's worker count compares with
// the target.
func (r *Report) VerdictLine() string {
	for _, p := range r.Points {
		if p.Workers == r.TargetWorkers && r.Verdict != NA {
			return fmt.Sprintf("%s: %.2f× at %d workers vs 1 (target ≥ %.2f×)", r.Verdict, p.Ratio, p.Workers, r.Target)
		}
	}
	return fmt.Sprintf("%s: target ≥ %.2f× at %d workers vs 1 needs both worker counts measured", NA, r.Target, r.TargetWorkers)
}

// Markdown returns the report as a Markdown document.
func (r *Report) Markdown() string {
	var b strings.Builder
	b.WriteString("# Switchyard horizontal scaling\n\n")
	fmt.Fprintf(&b, "%s, protocol=%s. Upstream: %s. Gateway: %s, %s, N upstream-workers, one NATS server and one tenancy-svc, each its own process; a fresh gateway per worker count. "+
		"Load: %d go-sdk client sessions making sequential `%s` calls (spread round robin over the edges), %v warmup + %v measured per worker count.\n\n",
		r.Start.UTC().Format(time.RFC3339), r.Protocol, r.Upstream, count(r.Edges, "edge"), count(r.Routers, "router"), r.Conns, r.Tool, r.Warmup, r.Duration)
	fmt.Fprintf(&b, "Host: %s.%s CPU columns are µs of CPU time per successful call: gw sums every gateway process, NATS included; upstream the workers' stdio fixtures; driver this load generator.\n\n", r.Host, r.runtimeLine())
	fmt.Fprintf(&b, "**%s**\n\n", r.VerdictLine())
	t := mdtable.Table{
		Header: []string{"workers", "req/s", fmt.Sprintf("ratio to %d", r.BaselineWorkers), "p50 µs", "p99 µs", "errors", "CPU µs/call gw / upstream / driver", "per worker: sessions, share of calls", "load after"},
		Right:  []bool{true, true, true, true, true, true, true, false, false},
	}
	for _, p := range r.Points {
		st := p.Stage
		t.AddRow(strconv.Itoa(p.Workers), fmt.Sprintf("%.0f", st.ReqPerSec), fmt.Sprintf("%.2f", p.Ratio),
			us(st.Latency.P50), us(st.Latency.P99), strconv.Itoa(st.Errors), cpus(&st),
			sharesText(p.Shares), p.LoadAvg)
	}
	b.WriteString(t.String())
	b.WriteString("\nClient sessions are placed on workers by rendezvous hashing of (edge, session, upstream), so the sessions per worker are uneven. " +
		"Each worker's stdio fixture tags every result with the worker's id, which gives the calls per worker and, from each session's last call, the sessions per worker. " +
		"A single-threaded upstream serves at most 1/service-time calls per second however many sessions wait on it: while the upstreams are the bottleneck the calls split about evenly (and a crowded worker's sessions wait longer); " +
		"when the calls split like the sessions instead, the bottleneck is elsewhere (the gateway, the driver or the machine's CPU).\n")
	errs := ""
	for _, p := range r.Points {
		if p.Stage.FirstError != "" {
			errs += fmt.Sprintf("- workers=%d: %d errors, first: `%s`\n", p.Workers, p.Stage.Errors, p.Stage.FirstError)
		}
	}
	if errs != "" {
		b.WriteString("\nErrors:\n\n" + errs)
	}
	b.WriteString(r.idleRSSMarkdown())
	fmt.Fprintf(&b, "\n![requests per second vs workers](%s)\n", PlotName)
	return b.String()
}

// idleRSSMarkdown returns the idle RSS of every gateway, one table per
// worker count; "" when none was measured.
func (r *Report) idleRSSMarkdown() string {
	var b strings.Builder
	for _, p := range r.Points {
		if p.IdleRSS == nil {
			continue
		}
		if b.Len() == 0 {
			fmt.Fprintf(&b, "\n## Idle RSS per gateway process\n\nVmRSS from /proc/<pid>/status, %v after each gateway was ready, before its load; %s\n", p.IdleRSS.After, report.MarkdownNote)
		}
		fmt.Fprintf(&b, "\n%s (max %d KiB, max anon %s KiB):\n\n%s", count(p.Workers, "worker"), p.IdleRSS.MaxKiB(), report.KiBText(p.IdleRSS.MaxAnonKiB()), p.IdleRSS.Markdown())
	}
	return b.String()
}

// sharesText formats shares as "worker-1 20s 49%, worker-2 44s 51%"
// (sessions, share of calls).
func sharesText(shares []Share) string {
	parts := make([]string, len(shares))
	for i, s := range shares {
		parts[i] = fmt.Sprintf("%s %ds %.0f%%", s.Worker, s.Sessions, 100*s.Fraction)
	}
	return strings.Join(parts, ", ")
}

// count returns "1 edge", "2 edges".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// cpus formats a stage's gateway, upstream and driver CPU per call.
func cpus(st *sweep.StageResult) string {
	return cpu(st.GatewayCPUPerCall) + " / " + cpu(st.UpstreamCPUPerCall) + " / " + cpu(st.DriverCPUPerCall)
}

func cpu(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *v)
}

// Chart returns req/s against workers: the measurement, linear scaling
// from the baseline (dashed) and the target point.
func (r *Report) Chart() *svgplot.Chart {
	var ticks []float64
	measured := svgplot.Series{Name: "measured", Color: "#ff7f0e"}
	ideal := svgplot.Series{Name: "linear scaling", Color: "#7f7f7f", Dashed: true}
	var base *Point
	for i := range r.Points {
		if base == nil || r.Points[i].Workers < base.Workers {
			base = &r.Points[i]
		}
	}
	for _, p := range r.Points {
		x := float64(p.Workers)
		ticks = append(ticks, x)
		measured.Points = append(measured.Points, svgplot.Point{X: x, Y: p.Stage.ReqPerSec})
		if base != nil && base.Workers > 0 {
			ideal.Points = append(ideal.Points, svgplot.Point{X: x, Y: base.Stage.ReqPerSec * x / float64(base.Workers)})
		}
	}
	series := []svgplot.Series{measured, ideal}
	if base != nil && base.Workers == 1 && r.TargetWorkers > 0 {
		series = append(series, svgplot.Series{
			Name: fmt.Sprintf("target %.1f× at %d", r.Target, r.TargetWorkers), Color: "#2ca02c",
			Points: []svgplot.Point{{X: float64(r.TargetWorkers), Y: base.Stage.ReqPerSec * r.Target}},
		})
	}
	return &svgplot.Chart{
		Title:  fmt.Sprintf("tools/call throughput vs upstream-workers (%d connections)", r.Conns),
		X:      svgplot.Axis{Label: "upstream-workers", Ticks: ticks},
		Y:      svgplot.Axis{Label: "requests per second"},
		Series: series,
	}
}

// SVG renders [Report.Chart].
func (r *Report) SVG() ([]byte, error) {
	var b bytes.Buffer
	err := r.Chart().WriteSVG(&b)
	return b.Bytes(), err
}

// runtimeLine is the gateway processes' Go runtime settings as a sentence
// with a leading space, from the first point that recorded them; "" when
// none did.
func (r *Report) runtimeLine() string {
	for _, p := range r.Points {
		if p.GOGC != "" || p.GOMAXPROCS != "" {
			return fmt.Sprintf(" Gateway processes (and their stdio upstreams): GOGC=%s, GOMAXPROCS=%s.", or(p.GOGC, "default"), or(p.GOMAXPROCS, "default"))
		}
	}
	return ""
}

// or returns s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
