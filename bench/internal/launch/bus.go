package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// NATS is a running "switchyard nats" on its own, for "bench bus -mode
// tcp".
type NATS struct {
	*Process
	// URL is the server's client URL, nats://127.0.0.1:<port>.
	URL string
	// Runtime is the process's GOGC and GOMAXPROCS.
	Runtime
	// store is the JetStream store, a fresh temporary directory removed by
	// Stop (see [Cluster]'s).
	store string
}

// StartNATS starts "bin nats --addr 127.0.0.1:<free port> --store <fresh
// temporary directory>" with a gateway's runtime settings, as
// [StartCluster] starts a cluster's, and waits up to [StartTimeout] until
// it accepts TCP connections. On error nothing is left running.
func StartNATS(ctx context.Context, bin string) (_ *NATS, err error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	n := &NATS{URL: "nats://" + addr}
	if n.store, err = os.MkdirTemp("", "switchyard-bench-nats-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = n.Stop()
		}
	}()
	cmd := exec.Command(bin, "nats", "--addr", addr, "--store", n.store)
	cmd.Env, n.Runtime = gatewayEnv()
	if n.Process, err = start("nats", cmd, newLineWatcher("")); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if err := pollProcs(ctx, "NATS to accept connections on "+addr, []*Process{n.Process}, dials(addr)); err != nil {
		return nil, err
	}
	return n, nil
}

// Stop stops the server and removes its store. It is safe to call more
// than once.
func (n *NATS) Stop() error {
	var err error
	if n.Process != nil {
		err = n.Process.Stop()
	}
	return errors.Join(err, os.RemoveAll(n.store))
}

// BusResponderReady starts the line "bench bus -respond" writes to stderr
// once its subscription is live on the server; the subject follows it.
const BusResponderReady = "bus responder ready on "

// StartBusResponder starts "bin bus -respond -nats natsURL -subject
// subject" (the bench binary's echo responder) with a gateway's runtime
// settings, as a worker runs, and waits up to [StartTimeout] for its
// [BusResponderReady] line. It returns the process and its runtime
// settings. On error nothing is left running.
func StartBusResponder(ctx context.Context, name, bin, natsURL, subject string) (*Process, Runtime, error) {
	cmd := exec.Command(bin, "bus", "-respond", "-nats", natsURL, "-subject", subject)
	var rt Runtime
	cmd.Env, rt = gatewayEnv()
	p, got, err := startAnnounced(ctx, name, cmd, BusResponderReady)
	if err != nil {
		return nil, Runtime{}, err
	}
	if got != subject {
		_ = p.Stop()
		return nil, Runtime{}, fmt.Errorf("%s: ready on %q, want %q", name, got, subject)
	}
	return p, rt, nil
}
