package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchyard-mcp/switchyard/bench/internal/launch"
	"github.com/switchyard-mcp/switchyard/bench/internal/proxy"
)

// runProxy implements "bench proxy": a minimal reverse proxy to one
// upstream MCP endpoint, announced on stderr as launch.ProxyListening
// followed by its MCP endpoint. It returns the exit code: 0 after SIGTERM
// or an interrupt, 1 if serving fails, 2 on bad usage.
func runProxy(args []string) int {
	fs := flag.NewFlagSet("bench proxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "serve the proxy at `addr`")
	rawUpstream := fs.String("upstream", "", "the upstream's MCP endpoint `URL`, e.g. http://127.0.0.1:9000/mcp (required)")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	upstream, err := proxy.ParseUpstream(*rawUpstream)
	if err == nil {
		err = extraArgs(fs)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench proxy: %v\n", err)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench proxy: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	announce := launch.ProxyListening + proxy.Endpoint(dialAddr(*listen, ln.Addr()), upstream)
	if err := serveProxy(ctx, ln, upstream, announce, os.Stderr); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "bench proxy: %v\n", err)
		return 1
	}
	return 0
}

// serveProxy writes the line announce to stderr, then serves the proxy to
// upstream on ln until ctx is done; proxying errors go to stderr too.
func serveProxy(ctx context.Context, ln net.Listener, upstream *url.URL, announce string, stderr io.Writer) error {
	h := proxy.New(upstream, log.New(stderr, "bench proxy: ", log.LstdFlags))
	fmt.Fprintln(stderr, announce)
	return serve(ctx, ln, h)
}
