package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StopTimeout is how long Stop waits after SIGTERM before killing.
const StopTimeout = 15 * time.Second

// tailBytes is how much of a child's stderr is kept for error messages.
const tailBytes = 64 << 10

// Process is a child process. Its methods are safe for concurrent use.
type Process struct {
	// Name labels the process in messages.
	Name string
	cmd  *exec.Cmd
	out  *lineWatcher
	done chan struct{} // closed once the process has exited
	err  error         // Wait's result, set before done is closed
	stop sync.Once
}

// start runs cmd, capturing its stdout and stderr through w.
func start(name string, cmd *exec.Cmd, w *lineWatcher) (*Process, error) {
	return startLogged(name, cmd, w, "")
}

// startLogged runs cmd, capturing its stdout and stderr through w and, if
// logPath is not empty, appending them to that file too.
func startLogged(name string, cmd *exec.Cmd, w *lineWatcher, logPath string) (*Process, error) {
	var out io.Writer = w
	var logFile *os.File
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		logFile, out = f, io.MultiWriter(f, w)
	}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, cmd: cmd, out: w, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if logFile != nil {
			_ = logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// PID returns the process id; 0 for a Process that was not started (a
// zero Process, as in a [Stack] built by hand to describe one).
func (p *Process) PID() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Output returns the last 64 KiB the process wrote to stdout and stderr.
func (p *Process) Output() string { return p.out.tail() }

// exitError describes an early exit, with the process's last output.
func (p *Process) exitError() error {
	return fmt.Errorf("%s exited early (%v); its output:\n%s", p.Name, p.err, indent(p.Output()))
}

// Stop sends SIGTERM, waits up to [StopTimeout], then kills. It returns nil
// if the process exited by itself or on SIGTERM; calling it again returns
// the same result without signalling.
func (p *Process) Stop() error {
	var err error
	p.stop.Do(func() {
		select {
		case <-p.done:
			return // already gone: an early exit is reported where it matters
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(StopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.done
			err = fmt.Errorf("%s did not stop within %v of SIGTERM; killed", p.Name, StopTimeout)
		}
	})
	return err
}

// lineWatcher keeps the tail of a child's output, counts the lines that
// match and reports the first match.
type lineWatcher struct {
	what  string                           // the awaited line, for messages
	match func(line string) (string, bool) // nil: no line is awaited
	found chan string                      // receives the first match's value

	mu      sync.Mutex // guards the fields below
	buf     []byte     // output tail, at most tailBytes
	partial []byte     // current incomplete line
	matches int
}

// newLineWatcher watches for a line starting with prefix (none if prefix
// is empty); the rest of the line, trimmed, is the match's value.
func newLineWatcher(prefix string) *lineWatcher {
	w := &lineWatcher{what: prefix, found: make(chan string, 1)}
	if prefix != "" {
		w.match = func(line string) (string, bool) {
			rest, ok := strings.CutPrefix(line, prefix)
			return strings.TrimSpace(rest), ok
		}
	}
	return w
}

// newContainsWatcher counts the lines that contain substr.
func newContainsWatcher(substr string) *lineWatcher {
	return &lineWatcher{what: substr, found: make(chan string, 1), match: func(line string) (string, bool) {
		return line, strings.Contains(line, substr)
	}}
}

// Write implements io.Writer; it never fails.
func (w *lineWatcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if len(w.buf) > tailBytes {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-tailBytes:]...)
	}
	if w.match == nil {
		return len(b), nil
	}
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.partial[:i]), "\r")
		w.partial = w.partial[i+1:]
		if v, ok := w.match(line); ok {
			w.matches++
			if w.matches == 1 {
				w.found <- v
			}
		}
	}
	if len(w.partial) > tailBytes { // a runaway line never matches
		w.partial = w.partial[:0]
	}
	return len(b), nil
}

// count returns the number of matching lines so far.
func (w *lineWatcher) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.matches
}

func (w *lineWatcher) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// waitLine waits for the watched line, the process's exit or ctx.
func (p *Process) waitLine(ctx context.Context) (string, error) {
	select {
	case s := <-p.out.found:
		return s, nil
	case <-p.done:
		select { // the line and the exit may race
		case s := <-p.out.found:
			return s, nil
		default:
		}
		return "", p.exitError()
	case <-ctx.Done():
		return "", fmt.Errorf("%s: waiting for %q: %w", p.Name, p.out.what, context.Cause(ctx))
	}
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "  (no output)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// stopAll stops ps in order and joins their errors.
func stopAll(ps ...*Process) error {
	var errs []error
	for _, p := range ps {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	return errors.Join(errs...)
}
