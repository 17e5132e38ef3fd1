package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is one process of the deployment, on one host: started, signalled
// and started again with the same command. Safe for concurrent use.
type proc struct {
	name, host string
	bin        string
	args       []string
	env        []string
	log        string // log file, appended to across restarts
	net        *Net
	// ready reports whether the process serves (its /readyz, or its port).
	ready func() bool

	mu   sync.Mutex
	cmd  *exec.Cmd     // guarded by mu
	done chan struct{} // guarded by mu: closed when cmd has exited
}

// start starts the process (again); it must not be running.
func (p *proc) start() error {
	cmd := p.net.Command(p.host, p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s: start %s\n", time.Now().Format(time.RFC3339Nano), p.name)
	cmd.Stdout, cmd.Stderr = f, f
	// The kernel stops the child if the driver dies: an interrupted run
	// leaves no process behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// signal sends sig to the process and, if wait, waits up to 30 s for it
// to exit (then kills it).
func (p *proc) signal(sig syscall.Signal, wait bool) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return err
	}
	if !wait {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not exit within 30s of %v; killed", p.name, sig)
	}
}

// running reports whether the process is running.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}
