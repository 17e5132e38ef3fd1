//go:build linux

package upstream

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// isolate puts a stdio server's process in a process group of its own
// (its children and theirs join it, so the group is killed as a whole:
// killGroup), and has the kernel kill it if the worker dies, even by
// SIGKILL (Pdeathsig: sent when the thread that started it ends; the
// worker's threads end only with the process). Its own children are not
// covered by Pdeathsig: they end with the group when the worker stops the
// upstream.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends sig to the process group of cmd's process, if isolate
// made it the group's leader (nil if the group is gone), else to the
// process alone.
func killGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	if a := cmd.SysProcAttr; a == nil || !a.Setpgid {
		if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}
