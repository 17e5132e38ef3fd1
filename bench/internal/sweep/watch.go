package sweep

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/proccpu"
)

// progressWidth is the width the "\r"-updated progress line is padded to.
const progressWidth = 96

// The processes a stage's CPU window reads.
const (
	procGateway = iota
	procUpstreams
	procDriver
	numProcs
)

// cpuWindow holds CPU times read at the start and the end of a stage's
// measured window. It is written by the watch goroutine and read by apply
// after done is closed.
type cpuWindow struct {
	done       chan struct{}
	pids       [numProcs][]int
	start, end [numProcs]time.Duration
	closed     bool // the window closed normally and end was read
}

// watch starts a goroutine that reads CPU times when the measured window
// opens (from) and closes (until) and writes a progress line to progress
// (if not nil) twice a second meanwhile.
func watch(ctx context.Context, st Stage, procs Procs, from, until time.Time, c *counters, progress io.Writer) *cpuWindow {
	w := &cpuWindow{done: make(chan struct{})}
	if st.Side == SideGateway {
		w.pids[procGateway] = procs.Gateway
	}
	w.pids[procUpstreams] = procs.Upstreams
	w.pids[procDriver] = []int{0}
	go w.run(ctx, st, from, until, c, progress)
	return w
}

func (w *cpuWindow) run(ctx context.Context, st Stage, from, until time.Time, c *counters, progress io.Writer) {
	defer close(w.done)
	p := &progressLine{w: progress, label: stageLabel(st)}
	defer p.clear()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	open := time.NewTimer(time.Until(from))
	defer open.Stop()
	closing := time.NewTimer(time.Until(until))
	defer closing.Stop()
	opened := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-open.C:
			w.start = w.read()
			opened = true
		case <-closing.C:
			if !opened { // both fired together: the window cannot be measured
				return
			}
			w.end = w.read()
			w.closed = true
			return
		case now := <-tick.C:
			p.show(now, st, from, c)
		}
	}
}

// read returns the summed CPU time of each group of processes, marking a
// group not ok if any read fails.
func (w *cpuWindow) read() [numProcs]time.Duration {
	var v [numProcs]time.Duration
	for i, pids := range w.pids {
		ok := len(pids) > 0
		for _, pid := range pids {
			d, err := proccpu.Read(pid)
			ok = ok && err == nil
			v[i] += d
		}
		if !ok {
			w.pids[i] = nil // not ok: skipped from now on
		}
	}
	return v
}

// apply waits for the window to close and sets res's CPU figures.
func (w *cpuWindow) apply(res *StageResult, st Stage) {
	<-w.done
	per := func(i int) *float64 {
		if !w.closed || w.pids[i] == nil || res.Requests == 0 {
			return nil
		}
		v := float64(w.end[i]-w.start[i]) / float64(time.Microsecond) / float64(res.Requests)
		return &v
	}
	res.GatewayCPUPerCall = per(procGateway)
	res.UpstreamCPUPerCall = per(procUpstreams)
	res.DriverCPUPerCall = per(procDriver)
}

func stageLabel(st Stage) string {
	shape := ""
	if st.Shape != "" {
		shape = " " + st.Shape
	}
	return fmt.Sprintf("[%s%s %s c=%d]", st.Method, shape, st.Side, st.Conns)
}

// progressLine writes a "\r"-updated status line.
type progressLine struct {
	w     io.Writer
	label string
	shown bool
}

func (p *progressLine) show(now time.Time, st Stage, from time.Time, c *counters) {
	if p.w == nil {
		return
	}
	var s string
	if el := now.Sub(from); el < 0 {
		s = fmt.Sprintf("%s warmup %.1fs/%v", p.label, (st.Warmup + el).Seconds(), st.Warmup)
	} else {
		s = fmt.Sprintf("%s %.1fs/%v  %.0f req/s  %d errors", p.label, el.Seconds(), st.Duration,
			float64(c.done.Load())/el.Seconds(), c.failed.Load())
	}
	fmt.Fprintf(p.w, "\r%-*s", progressWidth, s)
	p.shown = true
}

func (p *progressLine) clear() {
	if p.w != nil && p.shown {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", progressWidth))
	}
}
