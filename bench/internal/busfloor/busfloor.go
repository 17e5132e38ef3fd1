package busfloor

import (
	"github.com/switchyard-mcp/switchyard/proto"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/hop"
)

// Modes: where the NATS server and the responder run.
const (
	// ModeInproc runs an embedded server and the responder in this
	// process, connected in-process.
	ModeInproc = "inproc"
	// ModeTCP connects over TCP to a server and a responder the caller
	// started as their own processes.
	ModeTCP = "tcp"
)

// Subject is the subject requests go to unless [Config.Subject] says
// otherwise (under the bench identity's subjects, proto.SubjBench, so
// that it may run on an authenticated server); Queue is the responder's
// queue group.
const (
	Subject = proto.SubjBench + ".bus.echo"
	Queue   = "bench.bus"
)

// DefaultTimeout is the per-request timeout when [Config.Timeout] is 0.
const DefaultTimeout = time.Second

// MaxErrorRate is the fraction of failed measured requests above which a
// run counts as failed ([Result.Check]), as for the latency gate.
const MaxErrorRate = 0.01

// maxPayload is the embedded server's max_payload, Switchyard's own
// servers' (switchyard dev and switchyard nats run with 8 MiB).
const maxPayload = 8 << 20

// headroom is left free under a server's max_payload for the stamps'
// headers and protocol lines.
const headroom = 4 << 10

// maxPrintedErrors bounds the request errors written to [Config.Log].
const maxPrintedErrors = 20

// Config configures [Run].
type Config struct {
	// Mode is [ModeInproc] or [ModeTCP].
	Mode string
	// NATSURL is the server's client URL, for ModeTCP only; a responder
	// ([Respond]) must already answer Subject there.
	NATSURL string
	// Subject is where requests go; "" means [Subject].
	Subject string
	// Warmup requests are made first and discarded; N requests are
	// measured. N must be positive, Warmup not negative.
	Warmup, N int
	// PayloadBytes is the size of every request's payload (the reply
	// echoes it); 0 sends empty messages.
	PayloadBytes int
	// Gap is the pause after every request, before the next one; 0 sends
	// them back to back. Between a gateway's sequential calls its bus
	// processes sit idle while the upstream works, and a hop that starts
	// from idle costs more than a hot one. On Linux a gap up to 2ms is
	// slept in nanosleep, so the pause is about Gap (a Go timer in an
	// otherwise idle process waits in epoll_wait's whole milliseconds:
	// ~1.1ms for 300µs); longer gaps, and every gap elsewhere, wait on a
	// timer. It is a minimum either way: [Result.Pause] has the pauses as
	// they were.
	Gap time.Duration
	// Timeout bounds each request; 0 means [DefaultTimeout].
	Timeout time.Duration
	// GOMAXPROCS, when positive, is set for the requests (warmup and
	// measured) with runtime.GOMAXPROCS and restored when Run returns; 0
	// leaves it as it is. It is process-wide: in ModeInproc it covers the
	// server and the responder too.
	GOMAXPROCS int
	// GOGC, when positive, is set for the requests with debug.SetGCPercent
	// and restored when Run returns; 0 leaves it as it is (from $GOGC).
	GOGC int
	// Stamps puts the one-way stamps on every request and reply (headers:
	// the trace flag and edge_pub, then worker_in and worker_out), which
	// the result's RequestHop, Responder and ReplyHop come from. Without
	// them the messages carry no headers, as an untraced call's; the
	// headers cost something of their own (nats.go decodes every message
	// that has them), so the round trip without them is the lower floor.
	Stamps bool
	// Log receives request errors as they happen; nil discards them.
	Log io.Writer
}

// Validate reports every problem with c, joined.
func (c Config) Validate() error {
	var errs []error
	switch c.Mode {
	case ModeInproc:
		if c.NATSURL != "" {
			errs = append(errs, errors.New("busfloor: a NATS URL is for mode tcp only"))
		}
	case ModeTCP:
		if c.NATSURL == "" {
			errs = append(errs, errors.New("busfloor: mode tcp needs a NATS URL"))
		}
	default:
		errs = append(errs, fmt.Errorf("busfloor: mode must be %s or %s, got %q", ModeInproc, ModeTCP, c.Mode))
	}
	if c.Subject != "" && (strings.ContainsAny(c.Subject, " \t\r\n*>") || slices.Contains(strings.Split(c.Subject, "."), "")) {
		errs = append(errs, fmt.Errorf("busfloor: subject %q is not a literal subject", c.Subject))
	}
	if c.N < 1 || c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("busfloor: need n >= 1 and warmup >= 0, got n=%d warmup=%d", c.N, c.Warmup))
	}
	if c.PayloadBytes < 0 || c.PayloadBytes > maxPayload-headroom {
		errs = append(errs, fmt.Errorf("busfloor: payload must be 0 to %d bytes, got %d", maxPayload-headroom, c.PayloadBytes))
	}
	if c.Gap < 0 || c.Timeout < 0 || c.GOMAXPROCS < 0 || c.GOGC < 0 {
		errs = append(errs, fmt.Errorf("busfloor: gap, timeout, gomaxprocs and gogc must not be negative, got %v, %v, %d, %d", c.Gap, c.Timeout, c.GOMAXPROCS, c.GOGC))
	}
	return errors.Join(errs...)
}

// Result is the outcome of one [Run]. Durations are nanoseconds in JSON.
type Result struct {
	// Mode is "bus-" plus [Config.Mode]: bus-inproc or bus-tcp.
	Mode         string        `json:"mode"`
	N            int           `json:"n"`
	Warmup       int           `json:"warmup"`
	PayloadBytes int           `json:"payload_bytes"`
	Gap          time.Duration `json:"gap_ns"`
	Timeout      time.Duration `json:"timeout_ns"`
	Subject      string        `json:"subject"`
	// Pause summarizes the pauses after the measured requests as they
	// were, from arming the timer until it fired; Gap is only what was
	// asked for (see [Config.Gap]). Empty when Gap is 0.
	Pause stats.Summary `json:"pause"`
	// NATSURL is the server's URL in ModeTCP; empty in ModeInproc.
	NATSURL string `json:"nats_url,omitempty"`
	// GOMAXPROCS is the requester's (this process's) GOMAXPROCS during the
	// requests; GOGC its GOGC then ("": $GOGC unset, Go's default 100).
	GOMAXPROCS int    `json:"gomaxprocs"`
	GOGC       string `json:"gogc"`
	// Stamps says whether the messages carried the one-way stamps; without
	// them RequestHop, Responder and ReplyHop are empty.
	Stamps bool `json:"stamps"`
	// Processes are the processes the caller started for the run (the
	// NATS server and the responder in ModeTCP), set by the caller.
	Processes []Process     `json:"processes,omitempty"`
	Start     time.Time     `json:"start"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	Host      report.Host   `json:"host"`
	// RTT summarizes the successful measured round trips, timed by the
	// requester from just before its publish until its Wait returned.
	RTT stats.Summary `json:"rtt"`
	// RequestHop is the responder's receipt minus the requester's publish
	// (edge_pub → worker_in), Responder the responder's turnaround
	// (worker_in → worker_out), ReplyHop the requester's receipt minus the
	// responder's publish (worker_out → the requester's Wait returned).
	// Over the same requests as RTT; empty without [Config.Stamps].
	RequestHop stats.Summary `json:"request_hop"`
	Responder  stats.Summary `json:"responder"`
	ReplyHop   stats.Summary `json:"reply_hop"`
	// Errors counts failed measured requests, WarmupErrors failed warmup
	// requests.
	Errors       int `json:"errors"`
	WarmupErrors int `json:"warmup_errors"`
	// Samples are the successful measured round trips in request order.
	Samples []time.Duration `json:"rtt_samples_ns"`
}

// Process is a process the driver started for a run, with the Go runtime
// settings in its environment.
type Process struct {
	Name       string `json:"name"`
	PID        int    `json:"pid"`
	GOGC       string `json:"gogc"`
	GOMAXPROCS string `json:"gomaxprocs"`
}

// Check returns an error when more than [MaxErrorRate] of the measured
// requests failed.
func (r *Result) Check() error {
	if float64(r.Errors) > MaxErrorRate*float64(r.N) {
		return fmt.Errorf("busfloor: %d of %d requests failed (limit %.0f%%)", r.Errors, r.N, MaxErrorRate*100)
	}
	return nil
}

// Run makes cfg.Warmup+cfg.N sequential requests and measures the last N.
// In ModeInproc it starts the embedded server and the responder and stops
// them before it returns. It fails if cfg is invalid, the setup fails, a
// first probe request gets no answer, or ctx ends; failed requests after
// that are counted in the result (see [Result.Check]).
func Run(ctx context.Context, cfg Config) (_ *Result, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Subject == "" {
		cfg.Subject = Subject
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	var nc *nats.Conn
	switch cfg.Mode {
	case ModeInproc:
		s, err := startInproc(cfg.Subject)
		if err != nil {
			return nil, err
		}
		defer s.stop()
		nc, err = nats.Connect("", nats.InProcessServer(s.ns), nats.Name("bench-bus-requester"))
		if err != nil {
			return nil, fmt.Errorf("busfloor: connect the requester: %w", err)
		}
	case ModeTCP:
		if nc, err = nats.Connect(cfg.NATSURL, nats.Name("bench-bus-requester")); err != nil {
			return nil, fmt.Errorf("busfloor: connect the requester to %s: %w", cfg.NATSURL, err)
		}
	}
	defer nc.Close()
	if limit := int(nc.MaxPayload()) - headroom; cfg.PayloadBytes > limit {
		return nil, fmt.Errorf("busfloor: payload of %d bytes exceeds the server's max_payload %d less %d bytes for headers", cfg.PayloadBytes, nc.MaxPayload(), headroom)
	}
	m, err := newMeter(nc, cfg)
	if err != nil {
		return nil, err
	}
	defer m.caller.Stop(nil)
	if err := m.probe(ctx); err != nil {
		return nil, err
	}

	if cfg.GOMAXPROCS > 0 {
		prev := runtime.GOMAXPROCS(cfg.GOMAXPROCS)
		defer runtime.GOMAXPROCS(prev)
	}
	gogc := os.Getenv("GOGC")
	if cfg.GOGC > 0 {
		defer debug.SetGCPercent(debug.SetGCPercent(cfg.GOGC))
		gogc = strconv.Itoa(cfg.GOGC)
	}
	r := &Result{
		Mode: "bus-" + cfg.Mode, N: cfg.N, Warmup: cfg.Warmup, PayloadBytes: cfg.PayloadBytes,
		Gap: cfg.Gap, Timeout: cfg.Timeout, Subject: cfg.Subject, NATSURL: cfg.NATSURL,
		GOMAXPROCS: runtime.GOMAXPROCS(0), GOGC: gogc, Stamps: cfg.Stamps,
		Start: time.Now(), Host: report.HostInfo(),
	}
	pause := time.NewTimer(time.Hour)
	pause.Stop() // Reset below; since Go 1.23 a stopped timer's channel holds no stale tick
	for i := range cfg.Warmup + cfg.N {
		m.once(ctx, i >= cfg.Warmup)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("busfloor: interrupted after %d requests: %w", i+1, err)
		}
		if cfg.Gap > 0 {
			from := time.Now()
			if err := wait(ctx, cfg.Gap, pause); err != nil {
				return nil, fmt.Errorf("busfloor: interrupted after %d requests: %w", i+1, err)
			}
			if i >= cfg.Warmup {
				m.pauses = append(m.pauses, time.Since(from))
			}
		}
	}
	r.Elapsed = time.Since(r.Start)
	m.fill(r)
	return r, nil
}

// idleMax is the longest pause [wait] takes in the kernel, where ctx is
// not seen until it ends; longer ones wait on a timer, whose
// millisecond-grained wake-up no longer matters.
const idleMax = 2 * time.Millisecond

// wait pauses for d, with the process idle: up to idleMax in nanosleep
// (see idle), past it on t (reset here) or until ctx ends. It returns
// ctx's error if ctx has ended.
func wait(ctx context.Context, d time.Duration, t *time.Timer) error {
	if d <= idleMax {
		idle(d)
		return ctx.Err()
	}
	t.Reset(d)
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// inproc is an embedded server with the responder's connection.
type inproc struct {
	ns *server.Server
	rc *nats.Conn
}

// startInproc starts an embedded server, without JetStream or a TCP
// listener, and a responder on subject on a connection of its own. On
// error nothing is left running.
func startInproc(subject string) (*inproc, error) {
	ns, err := server.NewServer(&server.Options{
		ServerName: "bench-bus", DontListen: true, NoLog: true, NoSigs: true, MaxPayload: maxPayload,
	})
	if err != nil {
		return nil, fmt.Errorf("busfloor: embedded server: %w", err)
	}
	go ns.Start()
	s := &inproc{ns: ns}
	if !ns.ReadyForConnections(10 * time.Second) {
		s.stop()
		return nil, errors.New("busfloor: embedded server not ready within 10s")
	}
	if s.rc, err = nats.Connect("", nats.InProcessServer(ns), nats.Name("bench-bus-responder")); err != nil {
		s.stop()
		return nil, fmt.Errorf("busfloor: connect the responder: %w", err)
	}
	if _, err := Respond(s.rc, subject); err != nil {
		s.stop()
		return nil, err
	}
	if err := s.rc.Flush(); err != nil {
		s.stop()
		return nil, fmt.Errorf("busfloor: responder: %w", err)
	}
	return s, nil
}

func (s *inproc) stop() {
	if s.rc != nil {
		s.rc.Close()
	}
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// meter makes the requests and keeps the measured ones.
type meter struct {
	nc      *nats.Conn
	caller  *bus.Caller
	subject string
	payload []byte
	timeout time.Duration
	stamps  bool
	log     io.Writer

	rtt, reqHop, turn, replyHop []time.Duration
	pauses                      []time.Duration // after the measured requests
	errs, warmErrs, printed     int
}

func newMeter(nc *nats.Conn, cfg Config) (*meter, error) {
	n := min(cfg.N, 1<<20) // room for the samples up front, within reason
	m := &meter{
		nc: nc, caller: bus.NewCaller(nc, 0), subject: cfg.Subject, payload: Payload(cfg.PayloadBytes),
		timeout: cfg.Timeout, stamps: cfg.Stamps, log: cfg.Log,
		rtt: make([]time.Duration, 0, n), reqHop: make([]time.Duration, 0, n),
		turn: make([]time.Duration, 0, n), replyHop: make([]time.Duration, 0, n),
	}
	if cfg.Gap > 0 {
		m.pauses = make([]time.Duration, 0, n)
	}
	if m.log == nil {
		m.log = io.Discard
	}
	if err := m.caller.Start(); err != nil {
		return nil, fmt.Errorf("busfloor: inbox: %w", err)
	}
	// The inbox subscription must be live on the server before the first
	// reply is published to it.
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("busfloor: inbox: %w", err)
	}
	return m, nil
}

// Payload returns n bytes of printable filler, what every request carries.
func Payload(n int) []byte {
	const filler = `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
	b := make([]byte, n)
	for i := range b {
		b[i] = filler[i%len(filler)]
	}
	return b
}

// sample is one round trip with its one-way parts.
type sample struct {
	rtt, reqHop, turn, replyHop time.Duration
}

// probe makes one request, unrecorded, so that a missing responder fails
// the run at once rather than N times.
func (m *meter) probe(ctx context.Context) error {
	if _, err := m.request(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("busfloor: interrupted: %w", ctx.Err())
		}
		return fmt.Errorf("busfloor: no answer on %s: %w", m.subject, err)
	}
	return nil
}

// once makes one request and records it (measured) or counts only its
// failure (warmup).
func (m *meter) once(ctx context.Context, measured bool) {
	s, err := m.request(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		// Interrupted: Run reports it.
	case err != nil:
		if measured {
			m.errs++
		} else {
			m.warmErrs++
		}
		if m.printed++; m.printed <= maxPrintedErrors {
			fmt.Fprintf(m.log, "bus: request: %v\n", err)
		} else if m.printed == maxPrintedErrors+1 {
			fmt.Fprintf(m.log, "bus: more request errors, not printed\n")
		}
	case measured:
		m.rtt = append(m.rtt, s.rtt)
		if m.stamps {
			m.reqHop, m.turn, m.replyHop = append(m.reqHop, s.reqHop), append(m.turn, s.turn), append(m.replyHop, s.replyHop)
		}
	}
}

// request makes one timed round trip as the edge sends a call: a reply
// subject of the Caller's inbox, PublishMsg, Wait.
func (m *meter) request(ctx context.Context) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	k := m.caller.New()
	defer k.Close()
	var hdr nats.Header
	if m.stamps {
		hdr = nats.Header{hop.Header: []string{"1"}}
	}
	start := time.Now()
	if hdr != nil {
		hop.Set(hdr, hop.EdgePub)
	}
	if err := m.nc.PublishMsg(&nats.Msg{Subject: m.subject, Reply: k.Reply(), Data: m.payload, Header: hdr}); err != nil {
		return sample{}, err
	}
	data, err := k.Wait(ctx)
	end := time.Now()
	if err != nil {
		return sample{}, err
	}
	if !bytes.Equal(data, m.payload) {
		return sample{}, fmt.Errorf("reply of %d bytes is not the request's %d bytes echoed", len(data), len(m.payload))
	}
	if !m.stamps {
		return sample{rtt: end.Sub(start)}, nil
	}
	st := hop.Stamps(k.Header())
	pub, in, out := st[hop.EdgePub], st[hop.WorkerIn], st[hop.WorkerOut]
	if pub == 0 || in == 0 || out == 0 {
		return sample{}, fmt.Errorf("reply lacks the stamps (%s, %s, %s): %v", hop.EdgePub, hop.WorkerIn, hop.WorkerOut, k.Header())
	}
	return sample{
		rtt:      end.Sub(start),
		reqHop:   time.Duration(in - pub),
		turn:     time.Duration(out - in),
		replyHop: time.Duration(end.UnixNano() - out),
	}, nil
}

// fill sets r's summaries, counts and samples.
func (m *meter) fill(r *Result) {
	r.Samples = append([]time.Duration(nil), m.rtt...)
	r.RTT = stats.Summarize(m.rtt)
	r.RequestHop, r.Responder, r.ReplyHop = stats.Summarize(m.reqHop), stats.Summarize(m.turn), stats.Summarize(m.replyHop)
	r.Pause = stats.Summarize(m.pauses)
	r.Errors, r.WarmupErrors = m.errs, m.warmErrs
}

// Respond subscribes nc to subject in queue group [Queue] with an echo
// responder: every request with a reply subject is answered with its own
// payload, published (PublishMsg) from the subscription's callback to the
// request's reply subject. A traced request (the hop package's trace
// header) gets its stamps back plus worker_in, when the callback started,
// and worker_out, just before the reply was published. The caller flushes
// nc to make the subscription live and unsubscribes it (or closes nc) to
// stop.
func Respond(nc *nats.Conn, subject string) (*nats.Subscription, error) {
	sub, err := nc.QueueSubscribe(subject, Queue, func(m *nats.Msg) {
		in := time.Now().UnixNano()
		if m.Reply == "" {
			return
		}
		var hdr nats.Header
		if hop.Traced(m.Header) {
			hdr = make(nats.Header, len(m.Header)+2)
			hop.Copy(hdr, m.Header)
			hdr.Set(hop.Prefix+hop.WorkerIn, strconv.FormatInt(in, 10))
			hop.Set(hdr, hop.WorkerOut)
		}
		// A failed publish leaves the requester to time out and count it.
		_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Data: m.Data, Header: hdr})
	})
	if err != nil {
		return nil, fmt.Errorf("busfloor: subscribe %s: %w", subject, err)
	}
	return sub, nil
}
