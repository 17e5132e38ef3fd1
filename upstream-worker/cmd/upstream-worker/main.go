// Command upstream-worker runs Switchyard's upstream-worker role as its own process.
package main

import (
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	worker "github.com/switchyard-mcp/switchyard/upstream-worker"
)

func main() {
	os.Exit(app.MainTraced("upstream-worker", os.Args[1:], func(f *config.File, nc *nats.Conn, log *slog.Logger, reg prometheus.Registerer, tp *trace.Provider) (app.Role, error) {
		c := worker.FromFile(f)
		c.Metrics = reg
		c.Tracer = tp
		return worker.New(c, nc, log)
	}))
}
