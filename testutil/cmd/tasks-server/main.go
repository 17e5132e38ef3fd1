// Command tasks-server is a test MCP upstream implementing the tasks
// extension io.modelcontextprotocol/tasks (SEP-2663); see package
// taskserver.
//
//	tasks-server -http 127.0.0.1:3002 -upstream http://127.0.0.1:3001/
//	tasks-server -http 127.0.0.1:3002
//
// With -upstream, it reverse-proxies everything that is not the tasks surface
// to that MCP endpoint (meant: the go-sdk conformance everything-server
// -stateless=true, which has no greet tool, so the fixture serves greet
// itself). Without it, it wraps a built-in stateless go-sdk server whose
// only tool is greet.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"

	"github.com/switchyard-mcp/switchyard/testutil/taskserver"
)

func main() {
	addr := flag.String("http", "127.0.0.1:3002", "listen address")
	upstream := flag.String("upstream", "", "URL of the MCP endpoint to forward non-task traffic to (empty: a built-in go-sdk server with greet)")
	verbose := flag.Bool("v", false, "log task transitions")
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	var next http.Handler
	opts := taskserver.Options{Logger: log}
	if *upstream != "" {
		u, err := url.Parse(*upstream)
		if err != nil || u.Scheme == "" || u.Host == "" {
			fmt.Fprintf(os.Stderr, "tasks-server: -upstream %q is not an absolute URL\n", *upstream)
			os.Exit(2)
		}
		// The upstream sees the client's Host, so its DNS-rebinding
		// protection judges the client's request, not the proxy's.
		next = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		}}
		opts.Greet = true // the everything-server has no greet
	} else {
		next = taskserver.GreetHandler()
	}

	srv := &http.Server{Addr: *addr, Handler: taskserver.New(next, opts), ReadHeaderTimeout: 10 * time.Second}
	log.Info("tasks-server listening", "addr", *addr, "upstream", *upstream)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("tasks-server stopped", "err", err)
		os.Exit(1)
	}
}
