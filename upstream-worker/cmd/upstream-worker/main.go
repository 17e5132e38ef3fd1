// Command upstream-worker runs Switchyard's upstream-worker role as its own process.
package main

import (
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
	worker "github.com/switchyard-mcp/switchyard/upstream-worker"
)

func main() {
	os.Exit(app.Main("upstream-worker", os.Args[1:], func(f *config.File, nc *nats.Conn, log *slog.Logger) (app.Role, error) {
		return worker.New(worker.FromFile(f), nc, log)
	}))
}
