package worker

import "sync/atomic"

// runnerKeep bounds the goroutines a runner keeps waiting for work
// between calls.
const runnerKeep = 256

// runner runs calls on goroutines kept between calls. A call's stack
// grows deep (the upstream session, the HTTP transport), and a fresh
// goroutine per call grew and copied its stack on every call (3% of the
// gateway's CPU at 64 connections, in a profile). Up to keep goroutines
// wait for the next call once theirs is done; beyond that a call gets a
// goroutine that exits after it. A kept goroutine that waits costs its
// stack, which the GC shrinks while it waits.
//
// run is safe for concurrent use; stop ends the waiting goroutines (a call
// running then finishes first) and is called once, after the last run.
type runner struct {
	work chan func() // unbuffered: a send succeeds only to a waiting goroutine
	done chan struct{}
	kept atomic.Int32
	keep int32
}

func newRunner(keep int) *runner {
	return &runner{work: make(chan func()), done: make(chan struct{}), keep: int32(keep)}
}

// run runs f on a waiting goroutine, or on a new one.
func (r *runner) run(f func()) {
	select {
	case r.work <- f:
		return
	default:
	}
	if r.kept.Add(1) <= r.keep {
		go r.loop(f)
		return
	}
	r.kept.Add(-1)
	go f()
}

// loop runs f, then the calls handed to it until stop.
func (r *runner) loop(f func()) {
	defer r.kept.Add(-1)
	for {
		f()
		select {
		case f = <-r.work:
		case <-r.done:
			return
		}
	}
}

func (r *runner) stop() { close(r.done) }
