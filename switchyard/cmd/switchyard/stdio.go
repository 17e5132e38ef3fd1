package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/switchyard-mcp/switchyard/switchyard/internal/stdiofront"
)

// headerFlags collects repeated --header "Name: value" flags. They are
// checked after parsing: the flag package would echo a bad value, which
// may hold a credential.
type headerFlags []string

func (f *headerFlags) String() string { return "" }

func (f *headerFlags) Set(s string) error {
	*f = append(*f, s)
	return nil
}

// runStdio bridges MCP over stdin/stdout to a gateway's streamable HTTP
// endpoint, for desktop clients that can only spawn a process.
func runStdio(args []string) int {
	fs := flag.NewFlagSet("stdio", flag.ContinueOnError)
	url := fs.String("url", "", "the gateway's MCP endpoint, e.g. http://127.0.0.1:8080/mcp or .../mcp/<upstream> (required)")
	var headerArgs headerFlags
	fs.Var(&headerArgs, "header", `"Name: value" added to every request, e.g. "Authorization: Bearer ..." (repeatable; also SWITCHYARD_STDIO_HEADERS, one per line, which keeps secrets out of the process list)`)
	defLevel := "info"
	if v := os.Getenv("SWITCHYARD_LOG_LEVEL"); v != "" {
		defLevel = v
	}
	level := fs.String("log-level", defLevel, "stderr log level: debug, info, warn, error (env SWITCHYARD_LOG_LEVEL)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: switchyard stdio --url URL [--header \"Name: value\"]... [--log-level LEVEL]\n\n"+
			"Reads MCP JSON-RPC messages on stdin, one per line, and bridges them to the\n"+
			"gateway's streamable HTTP endpoint; the gateway's messages go to stdout, logs\n"+
			"to stderr.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "switchyard stdio: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	if *url == "" {
		return fail("--url is required (e.g. --url http://127.0.0.1:8080/mcp)")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fail("--log-level %q: want debug, info, warn or error", *level)
	}
	headers := http.Header{}
	for i, arg := range headerArgs {
		name, value, err := stdiofront.ParseHeader(arg)
		if err != nil {
			return fail("--header #%d: %v", i+1, err)
		}
		headers.Add(name, value)
	}
	for _, line := range strings.Split(os.Getenv("SWITCHYARD_STDIO_HEADERS"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, value, err := stdiofront.ParseHeader(line)
		if err != nil {
			return fail("SWITCHYARD_STDIO_HEADERS: %v", err)
		}
		if _, set := headers[name]; !set { // flags win
			headers.Add(name, value)
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	b, err := stdiofront.New(stdiofront.Config{
		URL:    *url,
		Header: headers,
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
	}, log)
	if err != nil {
		return fail("%v", err)
	}
	// A client that has gone away must not kill the bridge before it
	// DELETEs the session: a write to the closed stdout fails instead.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch err := b.Run(ctx); {
	case err == nil:
		return 0
	case errors.Is(err, stdiofront.ErrUnreachable):
		fmt.Fprintf(os.Stderr, "switchyard stdio: %v\n", err)
		return 1
	case errors.Is(err, stdiofront.ErrSessionExpired):
		fmt.Fprintln(os.Stderr, "switchyard stdio: the gateway session expired or was closed; restart the MCP client to start a new one")
		return 1
	default:
		fmt.Fprintf(os.Stderr, "switchyard stdio: %v\n", err)
		return 1
	}
}
