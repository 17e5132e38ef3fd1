package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/sandbox"
)

// stdioCommand builds the command of one process of the stdio upstream,
// killed when life ends: the server itself, with a scrubbed environment
// (stdioenv.go) in a process group of its own (isolate), in its sandbox's
// working directory as its user and group; when the sandbox sets limits
// or Landlock rules, through the launcher (package sandbox: this
// executable, which applies them and executes the server). Errors: the
// worker's executable cannot be found for a launcher.
func (u *Upstream) stdioCommand(life context.Context) (*exec.Cmd, error) {
	sp := u.opts.Spec
	env := stdioEnv(sp.Env, sp.InheritEnv) // not the worker's: see stdioenv.go
	sb := sp.Sandbox
	var cmd *exec.Cmd
	if l := launchOf(sp.Command, sb); l.Needed() {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("sandbox: the worker's executable: %w", err)
		}
		req, err := json.Marshal(l)
		if err != nil {
			return nil, err
		}
		if len(l.ReadOnly)+len(l.ReadWrite) > 0 && sandbox.LandlockABI() == 0 {
			u.sandboxWarn.Do(func() {
				u.log.Warn("this kernel has no Landlock: the stdio server's filesystem rules are not enforced (its limits are)")
			})
		}
		cmd = exec.CommandContext(life, self)
		cmd.Args = []string{"switchyard-sandbox " + sp.Command[0]}
		cmd.Env = append(env, sandbox.EnvLaunch+"="+string(req))
	} else {
		cmd = exec.CommandContext(life, sp.Command[0], sp.Command[1:]...)
		cmd.Env = env
	}
	isolate(cmd)
	if sb != nil {
		cmd.Dir = sb.Workdir
		if (sb.UID != 0 || sb.GID != 0) && cmd.SysProcAttr != nil {
			// 0 is "the worker's": a user alone keeps the worker's group
			// (not root's), a group alone the worker's user.
			uid, gid := sb.UID, sb.GID
			if uid == 0 {
				uid = uint32(os.Getuid())
			}
			if gid == 0 {
				gid = uint32(os.Getgid())
			}
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid}
		}
	}
	return cmd, nil
}

// launchOf is the launcher's request for command under sb.
func launchOf(command []string, sb *proto.Sandbox) *sandbox.Launch {
	l := &sandbox.Launch{Argv: command}
	if sb != nil {
		l.Limits = sandbox.Limits{MemoryBytes: sb.MemoryBytes, OpenFiles: sb.OpenFiles, Processes: sb.Processes, CPUSeconds: sb.CPUSeconds}
		l.ReadOnly, l.ReadWrite = sb.ReadOnly, sb.ReadWrite
	}
	return l
}

// limitError fails the calls of a stdio process that ended on one of its
// sandbox limits (limitHit).
type limitError struct {
	limit string // the sandbox key: memory_bytes, open_files, processes, cpu_seconds
	value uint64
}

func (e *limitError) Error() string {
	return fmt.Sprintf("the process hit its sandbox limit %s (%d)", e.limit, e.value)
}

// limitHit tells, from how a stdio process of sandbox sb ended (ps) and its
// last stderr lines, which of its limits ended it: cpu_seconds when the
// kernel's SIGXCPU or SIGKILL ended it under a CPU limit; memory_bytes,
// open_files or processes when the process said so before it ended (an
// allocation, open or fork failing is how a program meets those limits).
// nil when none is known to have.
func limitHit(sb *proto.Sandbox, ps *os.ProcessState, stderr []string) *limitError {
	if sb == nil || ps == nil {
		return nil
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() && sb.CPUSeconds > 0 &&
		(ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL && ps.UserTime()+ps.SystemTime() >= time.Duration(sb.CPUSeconds)*time.Second) {
		return &limitError{"cpu_seconds", sb.CPUSeconds}
	}
	text := strings.ToLower(strings.Join(stderr, "\n"))
	for _, l := range []struct {
		name  string
		value uint64
		says  []string
	}{
		{"memory_bytes", sb.MemoryBytes, []string{"out of memory", "cannot allocate memory", "memoryerror", "enomem", "bad_alloc", "allocation failed"}},
		{"open_files", sb.OpenFiles, []string{"too many open files", "emfile"}},
		{"processes", sb.Processes, []string{"resource temporarily unavailable", "cannot fork", "eagain"}},
	} {
		if l.value == 0 {
			continue
		}
		for _, s := range l.says {
			if strings.Contains(text, s) {
				return &limitError{l.name, l.value}
			}
		}
	}
	return nil
}
