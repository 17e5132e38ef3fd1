package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/switchyard/internal/roles"
)

// runRoles runs a set of roles against a NATS server over TCP.
func runRoles(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var f app.Flags
	f.Register(fs)
	list := fs.String("roles", "all", "comma-separated roles: "+"tenancy-svc,router,upstream-worker,edge")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, log, code := f.Prepare()
	if code >= 0 {
		return code
	}
	names, err := roles.Parse(*list)
	if err != nil {
		log.Error("invalid roles", "err", err)
		return 2
	}
	set, err := roles.Build(names, cfg, func(role string) (*nats.Conn, error) {
		return app.ConnectAs(cfg.NATS, proto.Identity(role), log)
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
		anc, err := app.ConnectAudit(cfg.NATS, log)
		if err != nil {
			log.Error("audit search failed", "err", err)
			return 1
		}
		if anc != nil {
			defer anc.Close()
		}
		if err := set.AddTo(adm, anc); err != nil {
			log.Error("audit search failed", "err", err)
			return 1
		}
	}
	defer func() { stop(); _ = wait() }()
	if err := set.Run(ctx); err != nil {
		log.Error("role failed", "err", err)
		return 1
	}
	return 0
}
