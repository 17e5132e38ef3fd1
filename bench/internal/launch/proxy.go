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
// with a gateway's runtime settings (GOGC, GOMAXPROCS: the floor is
// measured as the gateway is run) and returns the process and the MCP
// endpoint it announces. On error nothing is left running.
func StartProxy(ctx context.Context, name, bin, upstreamURL string) (*Process, string, error) {
	argv := []string{"proxy", "-listen", "127.0.0.1:0", "-upstream", upstreamURL}
	cmd := exec.Command(bin, argv...)
	cmd.Env, _ = gatewayEnv()
	return startAnnounced(ctx, name, cmd, ProxyListening)
}
