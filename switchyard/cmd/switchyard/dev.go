package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/switchyard/internal/embedded"
	"github.com/switchyard-mcp/switchyard/switchyard/internal/roles"
)

// runDev runs every role and an embedded NATS server in this process.
func runDev(args []string) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	var f app.Flags
	f.RegisterFormat(fs, "text")
	natsAddr := fs.String("nats-listen", "", "also serve the embedded NATS on this TCP address (e.g. 127.0.0.1:4222) so separate workers can join")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, log, code := f.Prepare()
	if code >= 0 {
		return code
	}
	store, err := os.MkdirTemp("", "switchyard-dev-")
	if err != nil {
		log.Error("temp store", "err", err)
		return 1
	}
	defer os.RemoveAll(store)
	ns, err := embedded.Start(embedded.Options{Addr: *natsAddr, StoreDir: store})
	if err != nil {
		log.Error("embedded nats failed", "err", err)
		return 1
	}
	defer ns.Shutdown()
	set, err := roles.Build(roles.Order, cfg, func(role string) (*nats.Conn, error) {
		return nats.Connect("", nats.InProcessServer(ns), nats.Name("switchyard-dev-"+role))
	}, log)
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	defer set.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	adm, wait, err := app.StartAdmin(ctx, cfg, set.Registry, log)
	if err != nil {
		log.Error("admin listener failed", "err", err)
		return 1
	}
	if adm != nil {
		// One listener for every role: aggregated readiness.
		if err := set.AddTo(adm); err != nil {
			log.Error("audit search failed", "err", err)
			return 1
		}
	}
	defer func() { stop(); _ = wait() }()
	adminAddr := ""
	if adm != nil {
		adminAddr = adm.Addr()
	}
	go announce(ctx, set, *natsAddr, adminAddr, cfg.Audit.On(), cfg.Admin.Configured())
	if err := set.Run(ctx); err != nil {
		log.Error("role failed", "err", err)
		return 1
	}
	return 0
}

// announce prints how to connect once every role is ready. audit says
// the admin listener serves the audit search, adminCreds that a
// credential is configured for it.
func announce(ctx context.Context, set *roles.Set, natsAddr, adminAddr string, audit, adminCreds bool) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !set.Ready() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	addr := set.Roles["edge"].(interface{ Addr() string }).Addr()
	fmt.Fprintf(os.Stderr, "\nSwitchyard is running (embedded NATS, all roles).\n")
	fmt.Fprintf(os.Stderr, "  federated MCP endpoint:   http://%s/mcp\n", addr)
	fmt.Fprintf(os.Stderr, "  one upstream, own names:  http://%s/mcp/<upstream>\n", addr)
	if natsAddr != "" {
		fmt.Fprintf(os.Stderr, "  NATS for extra workers:   nats://%s\n", natsAddr)
	}
	if adminAddr != "" {
		fmt.Fprintf(os.Stderr, "  metrics and health:       http://%s/metrics, /readyz\n", adminAddr)
		switch {
		case audit && adminCreds:
			fmt.Fprintf(os.Stderr, "  audit search:             http://%s/audit/events  (Authorization: Bearer <audit or admin key>)\n", adminAddr)
		case audit:
			fmt.Fprintf(os.Stderr, "  audit search:             http://%s/audit/events  (refused: set SWITCHYARD_ADMIN_KEY=$(bin/switchyard keygen))\n", adminAddr)
		}
	}
	fmt.Fprintf(os.Stderr, "  try: npx @modelcontextprotocol/inspector  (transport: Streamable HTTP)\n\n")
}
