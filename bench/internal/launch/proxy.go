package launch

import (
	"context"
	"os/exec"
)

// ProxyListening starts the line "bench proxy" writes to stderr once it
// serves; the proxy's MCP endpoint (its base URL plus the upstream URL's
// path) follows it.
const ProxyListening = "proxy listening on "

// StartProxy starts "bin proxy -listen 127.0.0.1:0 -upstream upstreamURL"
// and returns the process and the MCP endpoint it announces. On error
// nothing is left running.
func StartProxy(ctx context.Context, name, bin, upstreamURL string) (*Process, string, error) {
	argv := []string{"proxy", "-listen", "127.0.0.1:0", "-upstream", upstreamURL}
	return startAnnounced(ctx, name, exec.Command(bin, argv...), ProxyListening)
}
