//go:build !linux

package busfloor

import "time"

// idle sleeps for d with a Go timer; on Linux it is a nanosleep (see
// sleep_linux.go), elsewhere a timer may overshoot a sub-millisecond d.
func idle(d time.Duration) { time.Sleep(d) }
