// Command router runs Switchyard's router role as its own process.
package main

import (
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/router"
)

func main() {
	os.Exit(app.MainTraced("router", os.Args[1:], func(f *config.File, nc *nats.Conn, log *slog.Logger, reg prometheus.Registerer, tp *trace.Provider) (app.Role, error) {
		c := router.FromFile(f)
		c.Metrics = reg
		c.Tracer = tp
		return router.New(c, nc, log)
	}))
}
