package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/launch"
	"github.com/switchyard-mcp/switchyard/bench/internal/procrss"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
)

// runSessions implements "bench sessions": the edge's memory per idle
// session. It starts a multi-process gateway (one edge, router and
// worker in front of the fixture), opens sessions in steps (initialize,
// notifications/initialized, then nothing: no GET stream, no call, the
// connections closed), and reads the edge's resident set size after each
// step once it settles. It prints a table and a BENCH_RESULT line, and
// writes sessions-<timestamp>.md into -out.
func runSessions(args []string) int {
	fs := flag.NewFlagSet("bench sessions", flag.ContinueOnError)
	sy := fs.String("switchyard", "", "switchyard binary (default: switchyard next to this binary)")
	n := fs.Int("n", 10000, "idle sessions to open in all")
	steps := fs.Int("steps", 4, "measurements, at n/steps, 2n/steps, ... n sessions")
	conc := fs.Int("c", 16, "sessions opened concurrently")
	settle := fs.Duration("settle", 3*time.Second, "wait after each step before reading the RSS")
	out := fs.String("out", "results", "results directory")
	evict := fs.Duration("evict-after", 0, "the edge's edge.session_evict_after (0: the edge's default, 2m); the last measurement waits past it")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	var errs []error
	if *n < 1 || *steps < 1 || *steps > *n || *conc < 1 || *n > 100000 {
		errs = append(errs, errors.New("need 1 <= -steps <= -n <= 100000 and -c >= 1"))
	}
	self, syBin, err := binaries(*sy)
	errs = append(errs, err, extraArgs(fs))
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "bench sessions: %v\n", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logDir := filepath.Join(*out, "sessions-"+report.Stamp(time.Now())+"-logs")
	c, err := launch.StartCluster(ctx, launch.ClusterOptions{
		SwitchyardBin: syBin,
		Topology:      report.Topology{Edges: 1, Routers: 1, Workers: 1},
		Upstreams:     []launch.Upstream{{Name: "fixture", Command: []string{self, "fixture"}, Processes: 1}},
		LogDir:        logDir, Protocol: "2025-11-25", WantTools: launch.FixtureTools(0),
		ExtraConfig: func() string {
			if *evict > 0 {
				return fmt.Sprintf("edge:\n  session_evict_after: %s\n", *evict)
			}
			return ""
		}(),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench sessions: %v\n", err)
		return 1
	}
	defer func() { _ = c.Stop() }()
	fmt.Fprintf(os.Stderr, "started %s\n", c)
	edgePID := c.Edges[0].PID()
	url := c.EdgeURLs[0]

	time.Sleep(*settle)
	base, err := procrss.Read(edgePID)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench sessions: %v\n", err)
		return 1
	}
	rows := []sessionsRow{{Sessions: 0, RSS: base}}
	opened := 0
	for i := 1; i <= *steps; i++ {
		target := *n * i / *steps
		if err := openSessions(ctx, url, target-opened, *conc); err != nil {
			fmt.Fprintf(os.Stderr, "bench sessions: after %d sessions: %v\n", opened, err)
			return 1
		}
		opened = target
		time.Sleep(*settle)
		rss, err := procrss.Read(edgePID)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench sessions: %v\n", err)
			return 1
		}
		rows = append(rows, sessionsRow{Sessions: opened, RSS: rss})
		fmt.Fprintf(os.Stderr, "%d sessions: edge RSS %.1f MiB\n", opened, float64(rss.KiB)/1024)
	}
	if *evict > 0 {
		// Past the eviction, and a sweep: the idle sessions left memory.
		time.Sleep(*evict + 12*time.Second)
		rss, err := procrss.Read(edgePID)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench sessions: %v\n", err)
			return 1
		}
		rows = append(rows, sessionsRow{Sessions: opened, RSS: rss, Evicted: true})
		fmt.Fprintf(os.Stderr, "%d sessions, evicted after %v: edge RSS %.1f MiB\n", opened, *evict, float64(rss.KiB)/1024)
	}
	md := sessionsTable(rows)
	fmt.Print(md)
	last, evictedKiB := rows[len(rows)-1], int64(-1)
	if last.Evicted {
		evictedKiB = last.RSS.KiB
		last = rows[len(rows)-2]
	}
	per := float64(last.RSS.KiB-base.KiB) / float64(last.Sessions)
	fmt.Printf("BENCH_RESULT sessions=%d edge_rss_idle_kib=%d edge_rss_kib=%d per_session_kib=%.2f edge_rss_evicted_kib=%d\n",
		last.Sessions, base.KiB, last.RSS.KiB, per, evictedKiB)
	if err := os.MkdirAll(*out, 0o755); err == nil {
		err = os.WriteFile(filepath.Join(*out, "sessions-"+report.Stamp(time.Now())+".md"), []byte(md), 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench sessions: %v\n", err)
		}
	}
	return 0
}

// sessionsRow is one measurement: the edge's RSS holding Sessions idle
// sessions.
type sessionsRow struct {
	Sessions int
	RSS      procrss.RSS
	Evicted  bool // measured after the sessions were evicted from memory
}

// sessionsTable renders rows as Markdown: RSS, its anonymous part, and
// the growth per session over the first row.
func sessionsTable(rows []sessionsRow) string {
	var b strings.Builder
	b.WriteString("| idle sessions | edge VmRSS (MiB) | RssAnon (MiB) | per session over none (KiB) |\n|---:|---:|---:|---:|\n")
	for _, r := range rows {
		per := "–"
		if r.Sessions > 0 {
			per = fmt.Sprintf("%.1f", float64(r.RSS.KiB-rows[0].RSS.KiB)/float64(r.Sessions))
		}
		label := fmt.Sprint(r.Sessions)
		if r.Evicted {
			label += " (evicted)"
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %s |\n", label, float64(r.RSS.KiB)/1024, float64(r.RSS.AnonKiB)/1024, per)
	}
	return b.String()
}

// openSessions opens n sessions at url, c at a time: initialize, then
// notifications/initialized; each session is then left idle.
func openSessions(ctx context.Context, url string, n, c int) error {
	tr := &http.Transport{MaxIdleConnsPerHost: c}
	defer tr.CloseIdleConnections() // idle sessions hold no connection
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, c)
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := openSession(ctx, client, url); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func openSession(ctx context.Context, client *http.Client, url string) error {
	post := func(body, sid string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return resp, nil
	}
	resp, err := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench-sessions","version":"1"}}}`, "")
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		return errors.New("initialize: no session id")
	}
	if _, err := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid); err != nil {
		return fmt.Errorf("initialized: %w", err)
	}
	return nil
}
