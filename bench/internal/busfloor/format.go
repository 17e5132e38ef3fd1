package busfloor

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/mdtable"
	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
)

// BenchLine returns the one-line machine-readable summary:
//
//	BENCH_RESULT mode=bus-inproc|bus-tcp n=N gap_us=G pause_p50_us=.. payload=B rtt_p50_us=.. rtt_p99_us=.. hop1_p50_us=.. hop2_p50_us=.. gomaxprocs=P responder_p50_us=.. errors=E stamps=true|false
//
// hop1 is the request hop (requester → responder), hop2 the reply hop
// (responder → requester), responder the responder's turnaround between
// them; all three are 0.0 with stamps=false (not measured). Latencies are
// microseconds with one decimal (a bus hop is a few µs), gap_us the pause
// asked for in whole microseconds, pause_p50_us the median pause as it
// was (about 1ms for any shorter gap, see [Config.Gap]; 0.0 without a
// gap), payload bytes, gomaxprocs the requester's.
func (r *Result) BenchLine() string {
	return fmt.Sprintf("BENCH_RESULT mode=%s n=%d gap_us=%d pause_p50_us=%s payload=%d rtt_p50_us=%s rtt_p99_us=%s hop1_p50_us=%s hop2_p50_us=%s gomaxprocs=%d responder_p50_us=%s errors=%d stamps=%t",
		r.Mode, r.N, r.Gap.Microseconds(), us1(r.Pause.P50), r.PayloadBytes,
		us1(r.RTT.P50), us1(r.RTT.P99), us1(r.RequestHop.P50), us1(r.ReplyHop.P50),
		r.GOMAXPROCS, us1(r.Responder.P50), r.Errors, r.Stamps)
}

// WriteText writes a short human-readable report to w: the round trip's
// percentiles, then the medians of its parts, in microseconds.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "bus: mode=%s n=%d warmup=%d payload=%dB gap=%v%s gomaxprocs=%d gogc=%s (%.1fs)\n",
		r.Mode, r.N, r.Warmup, r.PayloadBytes, r.Gap, r.pauseText(), r.GOMAXPROCS, gogcText(r.GOGC), r.Elapsed.Seconds())
	m := r.RTT
	fmt.Fprintf(&b, "  round trip   p50 %8sµs  p90 %8sµs  p99 %8sµs  max %8sµs  errors %d (warmup %d)\n",
		us1(m.P50), us1(m.P90), us1(m.P99), us1(m.Max), r.Errors, r.WarmupErrors)
	for _, p := range r.parts() {
		fmt.Fprintf(&b, "  %-12s p50 %8sµs  (%s)\n", p.name, us1(p.s.P50), p.span)
	}
	if !r.Stamps {
		b.WriteString("  no stamps (-stamps=false): no headers on the messages, one-way parts not measured\n")
	}
	for _, p := range r.Processes {
		fmt.Fprintf(&b, "  started %s (pid %d, GOGC=%s GOMAXPROCS=%s)\n", p.Name, p.PID, p.GOGC, p.GOMAXPROCS)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// part is one one-way segment of the round trip.
type part struct {
	name, span string
	s          stats.Summary
}

// parts returns the one-way parts; none without stamps.
func (r *Result) parts() []part {
	if !r.Stamps {
		return nil
	}
	return []part{
		{"request hop", "requester's publish → responder's callback", r.RequestHop},
		{"responder", "callback → its reply's publish", r.Responder},
		{"reply hop", "reply's publish → requester's Wait returned", r.ReplyHop},
	}
}

// Markdown returns the result as a Markdown section: a table of the round
// trip and its parts, in microseconds, and how they were measured.
func (r *Result) Markdown() string {
	t := mdtable.Table{
		Header: []string{"segment", "from → to", "n", "p50 µs", "p90 µs", "p99 µs", "max µs", "mean µs"},
		Right:  []bool{false, false, true, true, true, true, true, true},
	}
	row := func(name, span string, s stats.Summary) {
		t.AddRow(name, span, strconv.Itoa(s.N), us1(s.P50), us1(s.P90), us1(s.P99), us1(s.Max), us1(s.Mean))
	}
	row("round trip", "requester: before publish → Wait returned", r.RTT)
	for _, p := range r.parts() {
		row(p.name, p.span, p.s)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Bus round trip: mode=%s\n\n", r.Mode)
	fmt.Fprintf(&b, "%s, n=%d sequential request-replies after %d warmup, %d-byte payload echoed, a %v pause asked for after each%s, %d errors (%d in warmup).\n\n",
		r.Start.UTC().Format(time.RFC3339), r.N, r.Warmup, r.PayloadBytes, r.Gap, r.pauseText(), r.Errors, r.WarmupErrors)
	b.WriteString(t.String())
	b.WriteString("\n")
	switch r.Mode {
	case "bus-" + ModeInproc:
		b.WriteString("An embedded nats-server (no JetStream, no TCP listener) in the driver's process, the requester and the responder on in-process connections of their own (`switchyard dev`'s deployment).")
	case "bus-" + ModeTCP:
		fmt.Fprintf(&b, "`switchyard nats` and a responder (`bench bus -respond`) each in its own process, the requester in the driver's, over TCP loopback to %s (the multi-process gateway's deployment).", r.NATSURL)
	}
	fmt.Fprintf(&b, " The requester waits as the edge does, on the edge's multiplexed inbox (internal/bus Caller); the responder (queue group %s on %s) publishes the echo from its subscription callback, as a worker's intake receives a call. ", Queue, r.Subject)
	if r.Stamps {
		b.WriteString("The one-way parts come from stamps in headers (edge_pub, worker_in, worker_out; the requester's receipt when its Wait returned), wall clocks of processes on one machine; each row is its own median, so the parts' medians need not add up to the round trip's. The stamps' headers cost something themselves (nats.go decodes every message that has headers; an untraced call's messages have none): `-stamps=false` measures the round trip without them. ")
	} else {
		b.WriteString("No stamps (`-stamps=false`): the messages carry no headers, as an untraced call's, and the one-way parts are not measured. ")
	}
	fmt.Fprintf(&b, "Requester GOMAXPROCS=%d, GOGC=%s.", r.GOMAXPROCS, gogcText(r.GOGC))
	for _, p := range r.Processes {
		fmt.Fprintf(&b, " %s: pid %d, GOGC=%s, GOMAXPROCS=%s.", p.Name, p.PID, gogcText(p.GOGC), p.GOMAXPROCS)
	}
	fmt.Fprintf(&b, "\n\nHost: %s.\n", r.Host)
	return b.String()
}

// pauseText gives the median pause as it was, " (pause p50 1084.2µs)",
// or "" without pauses: a Go timer in an idle process sleeps about 1ms at
// least, whatever the gap asked for.
func (r *Result) pauseText() string {
	if r.Pause.N == 0 {
		return ""
	}
	return fmt.Sprintf(" (pause p50 %sµs)", us1(r.Pause.P50))
}

// gogcText says what an empty $GOGC means.
func gogcText(v string) string {
	if v == "" {
		return "unset (100)"
	}
	return v
}

// us1 formats d in microseconds with one decimal.
func us1(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 1, 64)
}
