//go:build unix

package upstream

import (
	"syscall"
	"time"
)

// selfCPU is this process's user+system CPU time (not its children's).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
