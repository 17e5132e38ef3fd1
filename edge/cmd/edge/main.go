// Command edge runs Switchyard's edge role as its own process.
package main

import (
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/edge"
	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/trace"
)

func main() {
	os.Exit(app.MainTraced("edge", os.Args[1:], func(f *config.File, nc *nats.Conn, log *slog.Logger, reg prometheus.Registerer, tp *trace.Provider) (app.Role, error) {
		c := edge.FromFile(f)
		c.Metrics = reg
		c.Tracer = tp
		return edge.New(c, nc, log)
	}))
}
