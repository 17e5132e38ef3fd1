package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Scenario is one fault, injected under load, and the deployment's
// return to whole.
type Scenario struct {
	Name string
	// Graceful scenarios must cost clients nothing: no error at all.
	Graceful bool
	// run injects the fault, undoes it (restarts, heals) and returns when
	// the fault began.
	run func(ctx context.Context, d *Deployment, o RunOptions) (time.Time, error)
}

// RunOptions sizes a run.
type RunOptions struct {
	// Hold is how long a killed process stays down before it is started
	// again.
	Hold time.Duration
	// Partition is how long a NATS node stays cut off.
	Partition time.Duration
	// Settle is the quiet time before and after each scenario.
	Settle time.Duration
	// Ready bounds the deployment's return to ready after a scenario.
	Ready time.Duration
}

// restart stops name with sig, waits hold, and starts it again.
func restart(name string, sig syscall.Signal) func(context.Context, *Deployment, RunOptions) (time.Time, error) {
	return func(ctx context.Context, d *Deployment, o RunOptions) (time.Time, error) {
		p := d.Proc(name)
		at := time.Now()
		if err := p.signal(sig, true); err != nil {
			return at, err
		}
		if err := sleep(ctx, o.Hold); err != nil {
			return at, err
		}
		return at, p.start()
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// Scenarios returns every scenario, in the order they run.
func Scenarios() []Scenario {
	var out []Scenario
	for _, r := range []string{"edge-1", "router-1", "worker-1", "worker-2", "tenancy-svc"} {
		out = append(out,
			Scenario{Name: "kill -9 " + r, run: restart(r, syscall.SIGKILL)},
			Scenario{Name: "SIGTERM " + r, Graceful: true, run: restart(r, syscall.SIGTERM)})
	}
	out = append(out,
		Scenario{Name: "SIGSTOP worker-1 (hung)", run: func(ctx context.Context, d *Deployment, o RunOptions) (time.Time, error) {
			at := time.Now()
			_ = d.Proc("worker-1").signal(syscall.SIGSTOP, false)
			_ = sleep(ctx, o.Hold)
			return at, d.Proc("worker-1").signal(syscall.SIGCONT, false)
		}},
		Scenario{Name: "kill -9 NATS node n3", run: restart("nats-n3", syscall.SIGKILL)},
		Scenario{Name: "partition NATS node n2", run: func(ctx context.Context, d *Deployment, o RunOptions) (time.Time, error) {
			at := time.Now()
			if err := d.Net.Cut(ctx, "n2"); err != nil {
				return at, err
			}
			serr := sleep(ctx, o.Partition)
			if err := d.Net.Heal(context.WithoutCancel(ctx), "n2"); err != nil {
				return at, err
			}
			return at, serr
		}},
		Scenario{Name: "rolling restart", Graceful: true, run: func(ctx context.Context, d *Deployment, o RunOptions) (time.Time, error) {
			at := time.Now()
			for _, p := range d.Procs {
				d.note("rolling restart: " + p.name)
				if err := p.signal(syscall.SIGTERM, true); err != nil {
					return at, err
				}
				if err := p.start(); err != nil {
					return at, err
				}
				if err := d.WaitReady(ctx, o.Ready); err != nil {
					return at, err
				}
				if err := sleep(ctx, o.Settle); err != nil { // NATS routes, heartbeats
					return at, err
				}
			}
			return at, nil
		}},
		Scenario{Name: "NATS store lost (all nodes)", run: func(ctx context.Context, d *Deployment, o RunOptions) (time.Time, error) {
			at := time.Now()
			return at, d.LoseStore()
		}},
	)
	return out
}

// Result is one scenario's outcome.
type Result struct {
	Scenario Scenario
	Window   Window
	// Recovered is from the fault to the last error a client saw (0: none).
	Recovered time.Duration
	// Whole is from the fault until every process was back and ready.
	Whole time.Duration
	Err   error
}

// OK reports whether the scenario met its bar: no hung call, no lost
// session, no call answered with another's result, and for a graceful one
// no error at all.
func (r Result) OK() bool {
	if r.Err != nil || r.Window.Hung > 0 || r.Window.Lost > 0 || r.Window.Wrong > 0 {
		return false
	}
	return !r.Scenario.Graceful || (len(r.Window.Errors) == 0 && r.Window.OpenFail == 0)
}

// Run runs s under dr's load on d.
func Run(ctx context.Context, d *Deployment, dr *Driver, s Scenario, o RunOptions) Result {
	r := Result{Scenario: s}
	if err := d.WaitReady(ctx, o.Ready); err != nil {
		r.Err = err
		return r
	}
	_ = sleep(ctx, o.Settle)
	t0 := time.Now()
	d.note("scenario: " + s.Name)
	at, err := s.run(ctx, d, o)
	if err == nil {
		err = d.WaitReady(ctx, o.Ready)
	}
	r.Whole = time.Since(at)
	r.Err = err
	_ = sleep(ctx, o.Settle)
	t1 := time.Now()
	// The calls started in the window end first (answered, or recorded
	// hung at the driver's bound): none escapes the count.
	if !dr.Settle(t1, dr.hangAfter+5*time.Second) && r.Err == nil {
		r.Err = errors.New("calls of the window never ended")
	}
	r.Window = dr.Window(t0, t1)
	if !r.Window.LastErr.IsZero() {
		r.Recovered = r.Window.LastErr.Sub(at)
	}
	return r
}

// Table renders results as a Markdown table.
func Table(rs []Result) string {
	var b strings.Builder
	b.WriteString("| scenario | calls | errors by code | hung | sessions lost | failed opens | last error after | all ready after | bar |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rs {
		var errs []string
		for k, n := range r.Window.Errors {
			errs = append(errs, fmt.Sprintf("%s: %d", k, n))
		}
		sort.Strings(errs)
		e := strings.Join(errs, ", ")
		if e == "" {
			e = "none"
		}
		rec := "-"
		if r.Recovered > 0 {
			rec = r.Recovered.Round(100 * time.Millisecond).String()
		}
		bar := "ok"
		if !r.OK() {
			bar = "**FAIL**"
			if r.Err != nil {
				bar += ": " + r.Err.Error()
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %d | %d | %s | %s | %s |\n", r.Scenario.Name, r.Window.Calls, e,
			r.Window.Hung, r.Window.Lost, r.Window.OpenFail, rec, r.Whole.Round(100*time.Millisecond), bar)
	}
	return b.String()
}
