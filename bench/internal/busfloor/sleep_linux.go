package busfloor

import (
	"syscall"
	"time"
)

// idle blocks the calling thread for d in the kernel (nanosleep), so the
// process sits idle for about d. A Go timer cannot do that below a
// millisecond: in an otherwise idle process the runtime waits for its next
// timer in epoll_wait, whose timeout is in whole milliseconds, so a 300µs
// timer fires after ~1.1ms.
func idle(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var rem syscall.Timespec
		err := syscall.Nanosleep(&ts, &rem)
		if err != syscall.EINTR {
			return
		}
		ts = rem // interrupted (SIGURG preemption, a signal): sleep the rest
	}
}
