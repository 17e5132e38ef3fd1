package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/bench/internal/busfloor"
	"github.com/switchyard-mcp/switchyard/bench/internal/launch"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
)

// runBus implements "bench bus" and returns the exit code: 0 when the run
// completes, 1 when it fails (more than busfloor.MaxErrorRate of the
// requests failed, or a result file could not be written), 2 on bad usage.
// With -respond it is the echo responder that -mode tcp starts.
func runBus(args []string) int { return busMain(args, os.Stdout, os.Stderr) }

// busOpts are the flags of "bench bus".
type busOpts struct {
	mode       string
	n, warmup  int
	payload    int
	gap        time.Duration
	timeout    time.Duration
	gomaxprocs int
	stamps     bool
	out        string
	switchyard string
	// respond (-respond) runs the responder on natsURL (-nats) and
	// subject instead of measuring.
	respond bool
	natsURL string
	subject string
}

// busFlags returns the flag set of "bench bus" and where it puts the
// values.
func busFlags() (*flag.FlagSet, *busOpts) {
	fs := flag.NewFlagSet("bench bus", flag.ContinueOnError)
	o := &busOpts{}
	fs.StringVar(&o.mode, "mode", busfloor.ModeInproc, "where NATS and the responder run: "+busfloor.ModeInproc+" (an embedded server in this process, in-process connections) or "+busfloor.ModeTCP+" ('switchyard nats' and a responder as their own processes, over TCP loopback)")
	fs.IntVar(&o.n, "n", 2000, "measured request-replies")
	fs.IntVar(&o.warmup, "warmup", 200, "warmup request-replies, discarded")
	fs.IntVar(&o.payload, "payload", 400, "request payload `bytes`, echoed back (400: about a tools/call envelope)")
	fs.DurationVar(&o.gap, "gap", 300*time.Microsecond, "pause after every request (a gateway's bus sits idle between sequential calls while the upstream works; 0: back to back); on Linux up to 2ms is slept in nanosleep (a Go timer in an idle process sleeps at least ~1ms), longer on a timer; the result reports the pauses as they were")
	fs.DurationVar(&o.timeout, "timeout", busfloor.DefaultTimeout, "timeout of each request")
	// As the processes the driver starts: the gateway's GOMAXPROCS unless
	// $GOMAXPROCS is set, which the runtime has applied already.
	procs, _ := strconv.Atoi(launch.GatewayGOMAXPROCS)
	if os.Getenv("GOMAXPROCS") != "" {
		procs = 0
	}
	fs.IntVar(&o.gomaxprocs, "gomaxprocs", procs, "GOMAXPROCS of this process during the requests, as the bench runs every gateway process ("+launch.GatewayGOMAXPROCS+" unless $GOMAXPROCS is set; 0: leave as is); its GOGC is the gateway's too ("+launch.GatewayGOGC+") unless $GOGC is set, and the processes -mode tcp starts get the gateway's runtime environment")
	fs.BoolVar(&o.stamps, "stamps", true, "put one-way time stamps in headers to split the round trip into its hops (false: no headers, as an untraced call; the headers cost something themselves)")
	fs.StringVar(&o.out, "out", "results", "directory for the JSON and Markdown results")
	fs.StringVar(&o.switchyard, "switchyard", "", "switchyard binary for -mode tcp (default: switchyard next to this binary)")
	fs.BoolVar(&o.respond, "respond", false, "be the echo responder on -nats and -subject until SIGTERM or an interrupt (what -mode tcp starts)")
	fs.StringVar(&o.natsURL, "nats", "", "with -respond: the NATS server's `URL`")
	fs.StringVar(&o.subject, "subject", busfloor.Subject, "the subject requests go to")
	return fs, o
}

// check validates the parsed flags.
func (o *busOpts) check(fs *flag.FlagSet) error {
	errs := []error{extraArgs(fs)}
	set := visited(fs)
	if o.respond {
		if o.natsURL == "" {
			errs = append(errs, errors.New("-respond needs -nats"))
		}
		for _, f := range []string{"mode", "n", "warmup", "payload", "gap", "timeout", "gomaxprocs", "stamps", "out", "switchyard"} {
			if set[f] {
				errs = append(errs, fmt.Errorf("-%s is for measuring, not with -respond", f))
			}
		}
		return errors.Join(errs...)
	}
	if o.natsURL != "" {
		errs = append(errs, errors.New("-nats is for -respond (-mode tcp starts its own server)"))
	}
	if o.switchyard != "" && o.mode != busfloor.ModeTCP {
		errs = append(errs, errors.New("-switchyard is for -mode tcp"))
	}
	cfg := o.config("")
	if o.mode == busfloor.ModeTCP {
		cfg.NATSURL = "nats://started-by-the-driver" // the server's URL is known once it runs
	}
	errs = append(errs, cfg.Validate())
	return errors.Join(errs...)
}

// config returns the run's configuration; natsURL is the server's in
// -mode tcp. The requester runs with the gateway's GOGC unless $GOGC is
// set, as the processes the driver starts do.
func (o *busOpts) config(natsURL string) busfloor.Config {
	cfg := busfloor.Config{
		Mode: o.mode, NATSURL: natsURL, Subject: o.subject,
		N: o.n, Warmup: o.warmup, PayloadBytes: o.payload, Gap: o.gap, Timeout: o.timeout,
		GOMAXPROCS: o.gomaxprocs, Stamps: o.stamps,
	}
	if os.Getenv("GOGC") == "" {
		cfg.GOGC, _ = strconv.Atoi(launch.GatewayGOGC)
	}
	return cfg
}

// busMain is runBus writing to stdout and stderr.
func busMain(args []string, stdout, stderr io.Writer) int {
	fs, o := busFlags()
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	err := o.check(fs)
	if err == nil && o.mode == busfloor.ModeTCP && !o.respond {
		_, _, err = binaries(o.switchyard)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench bus: %v\n", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if o.respond {
		if err := serveResponder(ctx, o.natsURL, o.subject, stderr); err != nil {
			fmt.Fprintf(stderr, "bench bus -respond: %v\n", err)
			return 1
		}
		return 0
	}

	cfg := o.config("")
	cfg.Log = stderr
	var procs []busfloor.Process
	if o.mode == busfloor.ModeTCP {
		st, err := startBusTCP(ctx, o.switchyard, o.subject, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "bench bus: %v\n", err)
			return 1
		}
		defer st.stop(stderr)
		cfg.NATSURL, procs = st.nats.URL, st.processes()
	}
	r, err := busfloor.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "bench bus: %v\n", err)
		return 1
	}
	r.Processes = procs
	return busReport(stdout, stderr, r, o.out)
}

// busTCP is what -mode tcp starts: "switchyard nats" and the responder.
type busTCP struct {
	nats      *launch.NATS
	responder *launch.Process
	rt        launch.Runtime // the responder's
}

// startBusTCP starts "switchyard nats" (sy, or the one next to this
// binary) and this binary's responder on subject, and says so on stderr.
// On error nothing is left running.
func startBusTCP(ctx context.Context, sy, subject string, stderr io.Writer) (*busTCP, error) {
	self, sy, err := binaries(sy)
	if err != nil {
		return nil, err
	}
	st := &busTCP{}
	if st.nats, err = launch.StartNATS(ctx, sy); err != nil {
		return nil, err
	}
	if st.responder, st.rt, err = launch.StartBusResponder(ctx, "responder", self, st.nats.URL, subject); err != nil {
		st.stop(stderr)
		return nil, err
	}
	fmt.Fprintf(stderr, "started switchyard nats %s (pid %d) and a responder (pid %d) on %s; GOGC=%s GOMAXPROCS=%s\n",
		st.nats.URL, st.nats.PID(), st.responder.PID(), subject, st.rt.GOGC, st.rt.GOMAXPROCS)
	return st, nil
}

// processes describes the started processes for the result.
func (st *busTCP) processes() []busfloor.Process {
	return []busfloor.Process{
		{Name: "nats", PID: st.nats.PID(), GOGC: st.nats.GOGC, GOMAXPROCS: st.nats.GOMAXPROCS},
		{Name: "responder", PID: st.responder.PID(), GOGC: st.rt.GOGC, GOMAXPROCS: st.rt.GOMAXPROCS},
	}
}

// stop stops the responder, then the server, reporting failures on
// stderr.
func (st *busTCP) stop(stderr io.Writer) {
	if st.responder != nil {
		if err := st.responder.Stop(); err != nil {
			fmt.Fprintln(stderr, "stopping:", err)
		}
	}
	if err := st.nats.Stop(); err != nil {
		fmt.Fprintln(stderr, "stopping:", err)
	}
}

// serveResponder connects to natsURL, answers requests on subject with
// their payload (busfloor.Respond), writes launch.BusResponderReady and
// the subject to stderr once the subscription is live on the server, and
// serves until ctx is done; then it drains the connection, so that the
// server has dropped the subscription when it returns.
func serveResponder(ctx context.Context, natsURL, subject string, stderr io.Writer) error {
	closed := make(chan struct{})
	nc, err := nats.Connect(natsURL, nats.Name("bench-bus-responder"), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		return fmt.Errorf("connect %s: %w", natsURL, err)
	}
	defer nc.Close()
	if _, err := busfloor.Respond(nc, subject); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("subscribe %s: %w", subject, err)
	}
	fmt.Fprintln(stderr, launch.BusResponderReady+subject)
	<-ctx.Done()
	if err := nc.Drain(); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	<-closed // nats.go closes the connection after its drain timeout at the latest
	return nil
}

// busReport prints r on stdout, writes its files into the directory out
// and returns the exit code: 1 when too many requests failed or a file
// could not be written, else 0.
func busReport(stdout, stderr io.Writer, r *busfloor.Result, out string) int {
	code := 0
	if err := r.WriteText(stdout); err != nil {
		code = 1
	}
	fmt.Fprintln(stdout, r.BenchLine())
	base := fmt.Sprintf("%s-%s", r.Mode, report.Stamp(r.Start)) // bus-inproc-<stamp>, bus-tcp-<stamp>
	if p, err := report.WriteJSON(out, base+".json", r); err != nil {
		fmt.Fprintf(stderr, "bench bus: write results: %v\n", err)
		code = 1
	} else {
		fmt.Fprintf(stderr, "wrote %s\n", p)
	}
	if p, err := report.WriteFile(out, base+".md", []byte(r.Markdown())); err != nil {
		fmt.Fprintf(stderr, "bench bus: write results: %v\n", err)
		code = 1
	} else {
		fmt.Fprintf(stderr, "wrote %s\n", p)
	}
	if err := r.Check(); err != nil {
		fmt.Fprintf(stderr, "bench bus: FAIL: %v\n", err)
		return 1
	}
	return code
}
