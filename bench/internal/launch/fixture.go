package launch

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

// FixtureListening starts the line "bench fixture -http" writes to stderr
// once it serves; the endpoint URL follows it.
const FixtureListening = "fixture listening on "

// StartTimeout bounds how long a child may take to start serving.
const StartTimeout = 60 * time.Second

// StartFixture starts "bin fixture -http 127.0.0.1:0 args..." and returns
// the process and the endpoint URL it announces. On error nothing is left
// running.
func StartFixture(ctx context.Context, name, bin string, args ...string) (*Process, string, error) {
	argv := append([]string{"fixture", "-http", "127.0.0.1:0"}, args...)
	return startAnnounced(ctx, name, exec.Command(bin, argv...), FixtureListening)
}

// startAnnounced starts cmd and waits up to [StartTimeout] for a line of
// its output starting with prefix; it returns the process and the rest of
// that line (a URL). On error nothing is left running.
func startAnnounced(ctx context.Context, name string, cmd *exec.Cmd, prefix string) (*Process, string, error) {
	p, err := start(name, cmd, newLineWatcher(prefix))
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, StartTimeout, fmt.Errorf("no answer within %v", StartTimeout))
	defer cancel()
	url, err := p.waitLine(ctx)
	if err != nil {
		_ = p.Stop()
		return nil, "", err
	}
	return p, url, nil
}
