package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/switchyard-mcp/switchyard/bench/internal/lb"
)

// runLB implements "bench lb": a plain round-robin HTTP load balancer in
// front of several edges, as an operator would put one (package lb): each
// request goes to the next ready backend, whatever session it belongs to
// (no affinity), and streams (SSE) are passed through as they come. The fault harness and
// `make conformance`'s ha mode run clients through it. It returns the
// exit code: 0 after SIGTERM or an interrupt, 1 if serving fails, 2 on
// bad usage.
func runLB(args []string) int {
	fs := flag.NewFlagSet("bench lb", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "serve at `addr`")
	backends := fs.String("backends", "", "comma-separated `host:port` list of the edges (required)")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	var hosts []string
	for _, h := range strings.Split(*backends, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if _, _, err := net.SplitHostPort(h); err != nil {
				fmt.Fprintf(os.Stderr, "bench lb: backend %q: want host:port\n", h)
				return 2
			}
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		fmt.Fprintln(os.Stderr, "bench lb: -backends is required")
		return 2
	}
	if err := extraArgs(fs); err != nil {
		fmt.Fprintf(os.Stderr, "bench lb: %v\n", err)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench lb: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "bench lb: listening on http://%s, round-robin over %s\n", dialAddr(*listen, ln.Addr()), strings.Join(hosts, ", "))
	b := lb.New(hosts, log.New(os.Stderr, "bench lb: ", log.LstdFlags))
	go b.Run(ctx)
	if err := serve(ctx, ln, b); err != nil && ctx.Err() == nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "bench lb: %v\n", err)
		return 1
	}
	return 0
}
