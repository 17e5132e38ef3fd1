package latency

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/mdtable"
	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
)

// BenchLine returns the one-line machine-readable summary CI greps for:
//
//	BENCH_RESULT mode=M protocol=V n=N direct_p50_us=.. direct_p99_us=.. gw_p50_us=.. gw_p90_us=.. gw_p99_us=.. added_p50_us=.. added_p99_us=..
//
// Values are whole microseconds, truncated toward zero.
func (r *Result) BenchLine() string {
	return fmt.Sprintf("BENCH_RESULT mode=%s protocol=%s n=%d direct_p50_us=%s direct_p99_us=%s gw_p50_us=%s gw_p90_us=%s gw_p99_us=%s added_p50_us=%s added_p99_us=%s",
		r.Mode, r.Protocol, r.N,
		us(r.Direct.Summary.P50), us(r.Direct.Summary.P99),
		us(r.Gateway.Summary.P50), us(r.Gateway.Summary.P90), us(r.Gateway.Summary.P99),
		us(r.AddedP50), us(r.AddedP99))
}

// WriteText writes a short human-readable report (percentiles per side and
// the added latency) to w.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "latency: mode=%s protocol=%s n=%d warmup=%d (%.1fs)\n", r.Mode, r.Protocol, r.N, r.Warmup, r.Elapsed.Seconds())
	for _, s := range []struct {
		name string
		side Side
	}{{"direct", r.Direct}, {"gateway", r.Gateway}} {
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
	_, err := io.WriteString(w, b.String())
	return err
}

// Markdown returns the result as a Markdown section: a table with one row
// per side plus the added latency, in microseconds.
func (r *Result) Markdown() string {
	t := mdtable.Table{
		Header: []string{"side", "tool", "protocol", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "mean µs", "errors"},
		Right:  []bool{false, false, false, true, true, true, true, true, true, true},
	}
	row := func(name string, s Side) {
		cells := append([]string{name, s.Tool, s.Protocol}, micros(s.Summary)...)
		t.AddRow(append(cells, strconv.Itoa(s.Errors))...)
	}
	row("direct", r.Direct)
	row("gateway", r.Gateway)
	t.AddRow("added", "", "", us(r.AddedP50), "", us(r.AddedP99))
	var b strings.Builder
	fmt.Fprintf(&b, "## Latency gate: mode=%s protocol=%s\n\n", r.Mode, r.Protocol)
	fmt.Fprintf(&b, "%s, n=%d per side after %d warmup calls, interleaved on one session per side.\n\n",
		r.Start.UTC().Format(time.RFC3339), r.N, r.Warmup)
	b.WriteString(t.String())
	fmt.Fprintf(&b, "\nHost: %s.", r.Host)
	if r.GOGC != "" {
		fmt.Fprintf(&b, " Gateway GOGC=%s.", r.GOGC)
	}
	if r.GatewayCPUPerCall != nil {
		fmt.Fprintf(&b, " Gateway CPU: %.1f µs per call.", *r.GatewayCPUPerCall)
	}
	b.WriteString("\n")
	return b.String()
}

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// micros returns p50, p90, p99, p99.9, max and mean in microseconds.
func micros(m stats.Summary) []string {
	return []string{us(m.P50), us(m.P90), us(m.P99), us(m.P999), us(m.Max), us(m.Mean)}
}
