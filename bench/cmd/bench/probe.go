package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// runProbe implements "bench probe": a liveness check for container health
// checks in the scratch image, which has no shell, curl or nc. It returns
// the exit code: 0 if the target is up, 1 if not, 2 on bad usage.
func runProbe(args []string) int {
	fs := flag.NewFlagSet("bench probe", flag.ContinueOnError)
	raw := fs.String("url", "", "the `URL` to probe: http(s)://… (up: any HTTP answer below 500) or nats://host:port (up: the server's INFO greeting) (required)")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	u, err := parseProbeURL(*raw)
	if err == nil {
		err = extraArgs(fs)
	}
	if err == nil && *timeout <= 0 {
		err = errors.New("-timeout must be positive")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench probe: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := probe(ctx, u); err != nil {
		fmt.Fprintf(os.Stderr, "bench probe: %v\n", err)
		return 1
	}
	return 0
}

// parseProbeURL accepts an absolute http, https or nats URL with a host.
func parseProbeURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("-url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	switch u.Scheme {
	case "http", "https":
	case "nats":
		if u.Port() == "" {
			return nil, fmt.Errorf("-url %q: a nats URL needs host:port", raw)
		}
	default:
		return nil, fmt.Errorf("-url %q: want http://, https:// or nats://", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("-url %q: no host", raw)
	}
	return u, nil
}

// probe returns nil if the target at u is up, by u's scheme:
//
//   - http, https: a GET is answered with any status below 500. An MCP
//     streamable HTTP endpoint answers a bare GET (no session, no
//     initialize) with a 4xx, so a 2xx-only check would never pass there;
//     a 5xx means the server is answering but failing. Redirects are not
//     followed: a 3xx is an answer.
//   - nats: the server sends its INFO greeting, which it does only once it
//     accepts client connections (nats-server starts JetStream before it
//     opens the client listener). Nothing is sent to the server.
//
// ctx bounds the whole check.
func probe(ctx context.Context, u *url.URL) error {
	if u.Scheme == "nats" {
		return probeNATS(ctx, u.Host)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("%s: status %s", u, resp.Status)
	}
	return nil
}

// probeNATS dials addr and reads the first protocol line, which a NATS
// server opens every client connection with: "INFO {...}".
func probeNATS(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetReadDeadline(dl); err != nil {
			return err
		}
	}
	line, err := bufio.NewReaderSize(conn, 4096).ReadString('\n')
	if !strings.HasPrefix(line, "INFO ") {
		if err != nil {
			return fmt.Errorf("nats %s: no INFO greeting: %w", addr, err)
		}
		return fmt.Errorf("nats %s: greeting %.40q, want INFO", addr, line)
	}
	return nil
}
