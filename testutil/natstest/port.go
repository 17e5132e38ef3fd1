package natstest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// RestartablePort returns a free loopback TCP port for a server a test
// stops and starts again on the same port. A port from Listen(":0") lies
// in the kernel's ephemeral range, which outgoing connections draw their
// source ports from: while the server is down, any connection on the
// machine (the test's own clients reconnecting, or other tests) can take
// it, and the restart fails to bind. This port lies below that range
// (read from /proc/sys/net/ipv4/ip_local_port_range, else Linux's default
// 32768), so only an explicit bind can take it.
func RestartablePort(t testing.TB) int {
	t.Helper()
	hi := ephemeralLow()
	const lo = 10000
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p
	}
	t.Fatalf("no free port in [%d, %d)", lo, hi)
	return 0
}

// ephemeralLow is the first port of the kernel's ephemeral range, at least
// 20000 so that RestartablePort has room to choose.
func ephemeralLow() int {
	const def = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return def
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return def
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 20000 {
		return def
	}
	return n
}
