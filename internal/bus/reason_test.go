package bus

import (
	"strings"
	"testing"
)

// TestUnavailableReason: the detail of a worker's upstream state becomes
// a fixed phrase; nothing of the detail (URLs, addresses, paths) is kept.
func TestUnavailableReason(t *testing.T) {
	for _, c := range []struct{ detail, want string }{
		{`connect: calling "initialize": sending "initialize": Post "http://127.0.0.1:41234/mcp": dial tcp 127.0.0.1:41234: connect: connection refused`, "connection refused"},
		{`Post "https://mcp.internal.example:8443/mcp": dial tcp: lookup mcp.internal.example on 10.0.0.2:53: no such host`, "host not found"},
		{`Post "https://10.1.2.3/mcp": tls: failed to verify certificate: x509: certificate signed by unknown authority`, "TLS handshake failed"},
		{`Post "http://10.1.2.3/mcp": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`, "timed out"},
		{`exec: "/opt/mcp/bin/server": stat /opt/mcp/bin/server: no such file or directory`, "command could not be started"},
		{`process exited: exit status 2`, "process exited"},
		{`upstream credentials: X-Api-Key: open /etc/mcp/key: no such file or directory`, "its credentials are missing or invalid"},
		{`Post "http://10.0.0.4/mcp": context canceled`, "cancelled"},
		{`upstream stopped`, "stopped"},
		{`connecting`, "connecting"},
		{`catalog: tools/list: calling "tools/list": connection closed: EOF`, "connection lost"},
		{`something else at nats://10.0.0.9:4222`, "not connected"},
		{``, "not connected"},
	} {
		got := UnavailableReason(c.detail)
		if got != c.want {
			t.Errorf("UnavailableReason(%q) = %q, want %q", c.detail, got, c.want)
		}
		for _, leak := range []string{"127.0.0.1", "10.", "http", "/opt", "nats"} {
			if strings.Contains(got, leak) {
				t.Errorf("UnavailableReason(%q) = %q keeps %q", c.detail, got, leak)
			}
		}
	}
}
