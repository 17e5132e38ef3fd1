// Command edge runs Switchyard's edge role as its own process.
package main

import (
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/edge"
	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
)

func main() {
	os.Exit(app.Main("edge", os.Args[1:], func(f *config.File, nc *nats.Conn, log *slog.Logger) (app.Role, error) {
		return edge.New(edge.FromFile(f), nc, log)
	}))
}
