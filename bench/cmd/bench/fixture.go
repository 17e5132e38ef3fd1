package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/fixture"
)

// runFixture implements "bench fixture" and returns the exit code.
func runFixture(args []string) int {
	fs := flag.NewFlagSet("bench fixture", flag.ContinueOnError)
	var (
		httpAddr  = fs.String("http", "", "serve streamable HTTP at `addr` (paths /mcp and /); empty means stdio")
		stdio     = fs.Bool("stdio", false, "serve over stdin/stdout (the default when -http is empty)")
		stateless = fs.Bool("stateless", false, "with -http, serve in stateless mode")
		o         fixture.Options
	)
	fs.DurationVar(&o.ServiceTime, "service-time", 0, "time echo and extra tools sleep before answering")
	fs.IntVar(&o.ResultBytes, "result-bytes", 0, "if > 0, echo returns this many pattern bytes instead of its text")
	fs.IntVar(&o.ExtraTools, "tools", 0, "number of extra echo tools (tool-0001, ...)")
	fs.BoolVar(&o.Serial, "serial", false, "serialize all tool calls, like a single-threaded upstream")
	fs.StringVar(&o.Name, "name", fixture.DefaultName, "server implementation name")
	fs.StringVar(&o.Tag, "tag", os.Getenv(fixture.TagEnv), "if set, echo results carry it in _meta[\""+fixture.MetaTag+"\"] (default from $"+fixture.TagEnv+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || (*stdio && *httpAddr != "") {
		fmt.Fprintln(os.Stderr, "bench fixture: use either -stdio or -http ADDR, and no positional arguments")
		fs.Usage()
		return 2
	}

	if n := fixtureProcs(o.Serial, os.Getenv("GOMAXPROCS")); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	server := fixture.NewServer(o)

	var err error
	if *httpAddr != "" {
		err = serveHTTP(ctx, server, *httpAddr, *stateless)
	} else {
		err = server.Run(ctx, &mcp.StdioTransport{})
	}
	if err != nil && ctx.Err() == nil {
		logger.Error("fixture stopped", "err", err)
		return 1
	}
	return 0
}

// fixtureProcs is the GOMAXPROCS a fixture sets for itself, 0 to leave
// Go's default: a -serial fixture serves one call at a time, and runs on
// one P like the single-threaded stdio servers it stands for (Node,
// Python), unless $GOMAXPROCS (env) says otherwise. With a second P the
// Go runtime spins a thread looking for work at every wake-up, CPU that a
// single-threaded server does not burn and that the scaling benchmark,
// where four such processes share two cores with the gateway, would
// charge to the machine.
func fixtureProcs(serial bool, env string) int {
	if !serial || env != "" {
		return 0
	}
	return 1
}

// serveHTTP serves server over streamable HTTP at addr until ctx is done.
func serveHTTP(ctx context.Context, server *mcp.Server, addr string, stateless bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: stateless})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/", h)

	fmt.Fprintf(os.Stderr, "fixture listening on http://%s/mcp\n", dialAddr(addr, ln.Addr()))
	return serve(ctx, ln, mux)
}

// serve serves h on ln until ctx is done, then shuts the server down,
// giving open requests up to 5 seconds.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// dialAddr returns an address a client can dial to reach a listener asked
// for at requested and bound to bound: the requested host (loopback if it
// was empty or unspecified) with the actual port, so ":0" yields a usable
// "127.0.0.1:PORT".
func dialAddr(requested string, bound net.Addr) string {
	host, _, err := net.SplitHostPort(requested)
	if err != nil {
		return bound.String()
	}
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return bound.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
