package natstest

import (
	"net"
	"strconv"
	"testing"
)

// TestRestartablePort: the port is below the ephemeral range and free.
func TestRestartablePort(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		p := RestartablePort(t)
		if p < 10000 || p >= low {
			t.Fatalf("port %d outside [10000, %d)", p, low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		_ = l.Close()
	}
}
