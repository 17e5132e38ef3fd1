package launch

import "syscall"

// sysProcAttr makes the kernel send SIGTERM to the child when the driver
// dies, so an interrupted run leaves no servers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
