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

// minRateWindow is how much of the measured window the progress line waits
// for before it shows a rate.
const minRateWindow = 200 * time.Millisecond

// The processes a stage's CPU window reads: procMiddle is what sits
// between the driver and the upstreams on the stage's side (the gateway
// processes, the proxy process, nothing for direct).
const (
	procMiddle = iota
	procUpstreams
	procDriver
	numProcs
)

// cpuWindow holds CPU times read at the start and the end of a measured
// window. It is written by the watch goroutine and read by applyCPU after
// done is closed.
type cpuWindow struct {
	done       chan struct{}
	pids       [numProcs][]int
	start, end [numProcs]time.Duration
	closed     bool // the window closed normally and end was read
}

// span is one measured window as the progress line shows it: label, a
// warmup, then length from from until until.
type span struct {
	label          string
	warmup, length time.Duration
	from, until    time.Time
}

// watch starts a goroutine that reads CPU times when the measured window
// opens (sp.from) and closes (sp.until) and writes a progress line to
// progress (if not nil) twice a second meanwhile. Gateway processes are
// read only for the gateway side, the proxy only for the proxy side.
func watch(ctx context.Context, side string, procs Procs, sp span, c *counters, progress io.Writer) *cpuWindow {
	w := &cpuWindow{done: make(chan struct{})}
	switch side {
	case SideGateway:
		w.pids[procMiddle] = procs.Gateway
	case SideProxy:
		w.pids[procMiddle] = procs.Proxy
	}
	w.pids[procUpstreams] = procs.Upstreams
	w.pids[procDriver] = []int{0}
	go w.run(ctx, sp, c, progress)
	return w
}

func (w *cpuWindow) run(ctx context.Context, sp span, c *counters, progress io.Writer) {
	defer close(w.done)
	p := &progressLine{w: progress, label: sp.label}
	defer p.clear()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	open := time.NewTimer(time.Until(sp.from))
	defer open.Stop()
	closing := time.NewTimer(time.Until(sp.until))
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
			p.show(now, sp, c)
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

// applyCPU sets res's CPU figures from the closed windows ws, the CPU of
// each group summed over them: a group is unknown if any window could not
// read it.
func applyCPU(res *StageResult, ws []*cpuWindow) {
	per := func(i int) *float64 {
		if res.Requests == 0 {
			return nil
		}
		var sum time.Duration
		for _, w := range ws {
			if !w.closed || w.pids[i] == nil {
				return nil
			}
			sum += w.end[i] - w.start[i]
		}
		v := float64(sum) / float64(time.Microsecond) / float64(res.Requests)
		return &v
	}
	if res.Side == SideProxy {
		res.ProxyCPUPerCall = per(procMiddle)
	} else {
		res.GatewayCPUPerCall = per(procMiddle)
	}
	res.UpstreamCPUPerCall = per(procUpstreams)
	res.DriverCPUPerCall = per(procDriver)
}

// stageLabel labels st's console lines, with extra (say "round 2/5")
// inside the brackets if not empty.
func stageLabel(st Stage, extra string) string {
	shape := ""
	if st.Shape != "" {
		shape = " " + st.Shape
	}
	if extra != "" {
		extra = " " + extra
	}
	return fmt.Sprintf("[%s%s %s c=%d%s]", st.Method, shape, st.Side, st.Conns, extra)
}

// progressLine writes a "\r"-updated status line.
type progressLine struct {
	w     io.Writer
	label string
	shown bool
}

func (p *progressLine) show(now time.Time, sp span, c *counters) {
	if p.w == nil {
		return
	}
	var s string
	if el := now.Sub(sp.from); el < 0 {
		s = fmt.Sprintf("%s warmup %.1fs/%v", p.label, (sp.warmup + el).Seconds(), sp.warmup)
	} else {
		rate := "-" // a few calls over a few µs would read as 100,000s per second
		if el >= minRateWindow {
			rate = fmt.Sprintf("%.0f", float64(c.done.Load())/el.Seconds())
		}
		s = fmt.Sprintf("%s %.1fs/%v  %s req/s  %d errors", p.label, el.Seconds(), sp.length, rate, c.failed.Load())
	}
	fmt.Fprintf(p.w, "\r%-*s", progressWidth, s)
	p.shown = true
}

func (p *progressLine) clear() {
	if p.w != nil && p.shown {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", progressWidth))
	}
}
