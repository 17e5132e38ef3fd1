// Command tenancy-svc runs Switchyard's tenancy service as its own process.
package main

import (
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
	tenancy "github.com/switchyard-mcp/switchyard/tenancy-svc"
)

func main() {
	os.Exit(app.Main("tenancy-svc", os.Args[1:], func(f *config.File, nc *nats.Conn, log *slog.Logger, _ prometheus.Registerer) (app.Role, error) {
		// No metrics of its own beyond the process and NATS ones app.Main
		// registers: its micro service has STATS.
		return tenancy.New(tenancy.FromFile(f), nc, log)
	}))
}
