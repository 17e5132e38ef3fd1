package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/switchyard-mcp/switchyard/switchyard/internal/embedded"
)

// runNATS runs a standalone NATS server with JetStream.
func runNATS(args []string) int {
	fs := flag.NewFlagSet("nats", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:4222", "client address (host:port)")
	store := fs.String("store", "", "JetStream store directory, kept across restarts (default: <tmp>/switchyard-nats-<port>)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	dir := *store
	if dir == "" {
		_, port, _ := net.SplitHostPort(*addr)
		dir = filepath.Join(os.TempDir(), "switchyard-nats-"+port)
	}
	ns, err := embedded.Start(embedded.Options{Addr: *addr, StoreDir: dir, Log: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "switchyard nats:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "NATS (JetStream, max_payload %d) listening on nats://%s\n", embedded.MaxPayload, *addr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	ns.Shutdown()
	ns.WaitForShutdown()
	return 0
}

// runProbe exits 0 if the URL answers 2xx within 2s (for healthchecks in
// images that have no shell or curl).
func runProbe(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: switchyard probe URL")
		return 2
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintln(os.Stderr, "probe: status", resp.Status)
		return 1
	}
	return 0
}
