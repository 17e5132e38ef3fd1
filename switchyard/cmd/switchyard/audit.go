package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/proto"
)

const auditUsage = `usage: switchyard audit search [flags]

Searches the audit trail (the SWITCHYARD_AUDIT JetStream stream: every edge
records one event per MCP request it answers; the trail is on by default,
docs/audit.md), newest first, a page at a time. The table escapes control
and invisible characters in values clients choose (\x1b, \n, \u202e; a
backslash as \\); --json prints them as JSON strings, for programs.

  --tenant T --principal P --upstream U --tool NAME --method M
                 filters (exact); --tool is the name the upstream knows
                 (without "<upstream>__") or a resource URI
  --outcome O    ok, tool_error, a JSON-RPC error code (-32602), or error
                 (every outcome but ok)
  --since T --until T
                 RFC 3339 times, or durations before now (15m, 24h)
  --limit N      events per page (1..1000, default 50)
  --cursor C     continue from a previous page's next cursor
  --json         print the page as JSON ({"events":[...],"next_cursor":N})

Common flags: --nats URL (env SWITCHYARD_NATS; default nats://127.0.0.1:4222),
--creds FILE (the audit or admin identity's, or the directory of switchyard
nats init; env SWITCHYARD_NATS_CREDS), --nats-ca FILE (env
SWITCHYARD_NATS_CA), --nats-cert/--nats-key FILE, --stream NAME (default
SWITCHYARD_AUDIT), --timeout 10s.
Exit codes: 0 done, 1 the search failed, 2 usage.
`

// runAudit runs `switchyard audit args...` and returns the exit code.
func runAudit(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, auditUsage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, auditUsage)
		return 0
	case "search":
		return auditSearch(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "switchyard audit: unknown command %q\n\n%s", args[0], auditUsage)
	return 2
}

func auditSearch(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("switchyard audit search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, auditUsage) }
	var cn cliNATS
	cn.register(fs)
	stream := fs.String("stream", audit.DefaultStream, "audit stream")
	timeout := fs.Duration("timeout", 10*time.Second, "how long the search may take")
	asJSON := fs.Bool("json", false, "print the page as JSON")
	var q audit.Query
	fs.StringVar(&q.Tenant, "tenant", "", "tenant")
	fs.StringVar(&q.Principal, "principal", "", "principal")
	fs.StringVar(&q.Upstream, "upstream", "", "upstream")
	fs.StringVar(&q.Tool, "tool", "", "tool, prompt or resource name")
	fs.StringVar(&q.Method, "method", "", "MCP method")
	fs.StringVar(&q.Outcome, "outcome", "", "ok, tool_error, an error code, or error")
	since := fs.String("since", "", "RFC 3339 time or duration before now")
	until := fs.String("until", "", "RFC 3339 time or duration before now")
	fs.IntVar(&q.Limit, "limit", audit.DefaultLimit, "events per page (1..1000)")
	cursor := fs.String("cursor", "", "next cursor of a previous page")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "switchyard audit search: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	now := time.Now()
	for _, tf := range []struct {
		name, val string
		dst       *time.Time
	}{{"since", *since, &q.Since}, {"until", *until, &q.Until}} {
		if tf.val == "" {
			continue
		}
		t, err := audit.ParseTime(tf.val, now)
		if err != nil {
			return usageErr("--%s: %v", tf.name, err)
		}
		*tf.dst = t
	}
	if *cursor != "" {
		c, err := strconv.ParseUint(*cursor, 10, 64)
		if err != nil || c == 0 {
			return usageErr("--cursor: bad cursor %q", *cursor)
		}
		q.Cursor = c
	}
	if q.Limit < 1 || q.Limit > audit.MaxLimit {
		return usageErr("--limit: want 1..%d, got %d", audit.MaxLimit, q.Limit)
	}

	nc, err := cn.connect("switchyard-audit-search", *timeout, proto.IdentityAudit, proto.IdentityAdmin)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard audit search: %v\n", err)
		return 1
	}
	defer nc.Close()
	s, err := audit.NewSearcher(nc, *stream)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard audit search: %v\n", err)
		return 1
	}
	s.Timeout = *timeout
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	page, err := s.Search(ctx, q)
	switch {
	case errors.Is(err, audit.ErrBadQuery):
		return usageErr("%v", err)
	case err != nil:
		fmt.Fprintf(stderr, "switchyard audit search: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(page); err != nil {
			fmt.Fprintf(stderr, "switchyard audit search: %v\n", err)
			return 1
		}
		return 0
	}
	printAuditPage(stdout, stderr, page)
	return 0
}

// printAuditPage prints a page as a table, the next cursor on stderr (so
// that stdout stays the table). Names, methods and principals come from
// clients, so every value is printed through termSafe: nothing a client
// sends reaches the operator's terminal as a control sequence.
func printAuditPage(stdout, stderr io.Writer, page *audit.Page) {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tTENANT\tPRINCIPAL\tMETHOD\tUPSTREAM\tNAME\tOUTCOME\tDURATION\tTRACE")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return termSafe(s)
	}
	for _, h := range page.Events {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Seq,
			h.Time.UTC().Format("2006-01-02T15:04:05.000Z"), dash(h.Tenant), dash(h.Principal), dash(h.Method),
			dash(h.Upstream), dash(h.Name), dash(h.Outcome), h.Duration.Round(time.Microsecond), dash(h.TraceID))
	}
	tw.Flush()
	switch {
	case page.Next != 0:
		fmt.Fprintf(stderr, "%s (%d scanned); older: --cursor %d\n", countEvents(len(page.Events)), page.Scanned, page.Next)
	default:
		fmt.Fprintf(stderr, "%s (%d scanned); no older events\n", countEvents(len(page.Events)), page.Scanned)
	}
}

// countEvents is "1 event" or "n events".
func countEvents(n int) string {
	if n == 1 {
		return "1 event"
	}
	return strconv.Itoa(n) + " events"
}

// termSafe returns s with what a terminal could act on, or that would
// hide or reorder text, escaped Go-style: C0 controls (tab and newline
// included), DEL and bytes that are not UTF-8 as \xNN, C1 controls and
// other non-printing runes (bidi overrides, zero-width and line
// separators) as \uNNNN, and a backslash as \\ so that the escaping is
// unambiguous. Printable text, spaces included, is kept.
func termSafe(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == '\\' || r == utf8.RuneError || !unicode.IsPrint(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	const hexd = "0123456789abcdef"
	for s = s[i:]; s != ""; {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == utf8.RuneError && n == 1, r < utf8.RuneSelf && !unicode.IsPrint(r):
			b.WriteString(`\x`)
			b.WriteByte(hexd[s[0]>>4])
			b.WriteByte(hexd[s[0]&0xf])
		case !unicode.IsPrint(r):
			q := strconv.QuoteRuneToASCII(r) // '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}
