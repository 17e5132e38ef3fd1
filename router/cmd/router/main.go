// Command router runs Switchyard's router role as its own process.
package main

import (
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/router"
)

func main() {
	os.Exit(app.Main("router", os.Args[1:], func(f *config.File, nc *nats.Conn, log *slog.Logger) (app.Role, error) {
		return router.New(router.FromFile(f), nc, log)
	}))
}
