package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Outcomes of a call other than a JSON-RPC error code.
const (
	outOK        = "ok"
	outHung      = "hung"      // no answer within the driver's hang bound
	outTransport = "transport" // the HTTP exchange failed (connection cut, 5xx without a JSON-RPC body)
	outLost      = "session"   // the session is gone (404, or its connection broke)
	outWrong     = "wrong result"
)

// echoed is the text of an echo result.
func echoed(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) != 1 {
		return ""
	}
	if t, ok := res.Content[0].(*mcp.TextContent); ok {
		return t.Text
	}
	return ""
}

// codeRejected is the go-sdk's jsonrpc2.ErrRejected (internal there): a
// request its transport could not deliver or got an HTTP error for.
const codeRejected = -32005

// call is one tools/call the driver made.
type call struct {
	start, end time.Time
	outcome    string // outOK, outHung, outTransport, outLost or "code <n>"
	msg        string // the error, for the log
}

// Driver keeps sessions official-SDK client sessions calling a tool in a
// loop through one URL, and records every call. A session whose
// connection breaks is counted lost and replaced by a new one.
type Driver struct {
	url       string
	tool      string
	sleepMS   int
	hangAfter time.Duration

	mu      sync.Mutex
	calls   []call            // guarded by mu
	running map[int]time.Time // guarded by mu: calls in progress by session, since when
	lost    []time.Time       // guarded by mu: when each lost session was seen lost
	opens   []time.Time       // guarded by mu: sessions that failed to open, when

	seq      atomic.Int64 // numbers the calls: each echo's text is unique
	stopping atomic.Bool
	wg       sync.WaitGroup
}

// NewDriver returns a driver calling tool (an echo taking sleep_ms) at url;
// a call not answered within hangAfter counts as hung.
func NewDriver(url, tool string, sleepMS int, hangAfter time.Duration) *Driver {
	return &Driver{url: url, tool: tool, sleepMS: sleepMS, hangAfter: hangAfter, running: map[int]time.Time{}}
}

// Start runs n sessions until ctx ends or Stop.
func (d *Driver) Start(ctx context.Context, n int) {
	for i := range n {
		d.wg.Add(1)
		go d.session(ctx, i)
	}
}

// Stop ends the sessions and waits for them.
func (d *Driver) Stop() {
	d.stopping.Store(true)
	d.wg.Wait()
}

func (d *Driver) record(c call) {
	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.mu.Unlock()
}

var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}}

// connect opens a session, retrying (a failure to open is recorded, not a
// lost session: no session existed yet).
func (d *Driver) connect(ctx context.Context, i int) *mcp.ClientSession {
	for !d.stopping.Load() && ctx.Err() == nil {
		c := mcp.NewClient(&mcp.Implementation{Name: "chaos-driver", Version: "v1"}, nil)
		octx, cancel := context.WithTimeout(ctx, d.hangAfter)
		cs, err := c.Connect(octx, &mcp.StreamableClientTransport{Endpoint: d.url, HTTPClient: httpClient}, nil)
		cancel()
		if err == nil {
			return cs
		}
		d.mu.Lock()
		d.opens = append(d.opens, time.Now())
		d.mu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

func (d *Driver) session(ctx context.Context, i int) {
	defer d.wg.Done()
	// Sessions start spread over a call's length and pause a random few
	// milliseconds between calls: in lockstep, a fault injected on a
	// schedule could land between everyone's calls.
	time.Sleep(time.Duration(rand.Int64N(int64(time.Duration(d.sleepMS)*time.Millisecond) + 1)))
	for !d.stopping.Load() && ctx.Err() == nil {
		cs := d.connect(ctx, i)
		if cs == nil {
			return
		}
		broken := make(chan struct{})
		go func() { _ = cs.Wait(); close(broken) }()
		for !d.stopping.Load() && ctx.Err() == nil {
			c := d.callOnce(ctx, cs, i)
			if c.outcome != outOK {
				select {
				case <-broken:
					c.outcome = outLost
				case <-time.After(50 * time.Millisecond):
				}
			}
			d.record(c)
			if c.outcome == outLost {
				break
			}
			time.Sleep(time.Duration(rand.Int64N(int64(10 * time.Millisecond))))
		}
		select {
		case <-broken:
			if !d.stopping.Load() && ctx.Err() == nil {
				d.mu.Lock()
				d.lost = append(d.lost, time.Now())
				d.mu.Unlock()
			}
		default:
			_ = cs.Close()
			return
		}
	}
}

func (d *Driver) callOnce(ctx context.Context, cs *mcp.ClientSession, i int) call {
	c := call{start: time.Now()}
	d.mu.Lock()
	d.running[i] = c.start
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.running, i)
		d.mu.Unlock()
	}()
	cctx, cancel := context.WithTimeout(ctx, d.hangAfter)
	defer cancel()
	text := fmt.Sprint("s", i, "-", d.seq.Add(1))
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: d.tool,
		Arguments: map[string]any{"text": text, "sleep_ms": d.sleepMS}})
	c.end = time.Now()
	c.outcome = classify(cctx, res, err)
	if c.outcome == outOK && echoed(res) != text {
		// Another call's result, or none: worse than an error.
		c.outcome, c.msg = outWrong, fmt.Sprintf("sent %q, got %q", text, echoed(res))
	}
	if err != nil {
		c.msg = err.Error()
	}
	return c
}

// classify names a call's outcome.
func classify(ctx context.Context, res *mcp.CallToolResult, err error) string {
	var rpc *jsonrpc.Error
	switch {
	case err == nil && res != nil && res.IsError:
		return "tool error"
	case err == nil:
		return outOK
	case errors.As(err, &rpc) && rpc.Code == codeRejected:
		// The SDK's own: its transport failed the request (an HTTP
		// status, a cut connection); the message says which.
		return "rejected by the client's transport"
	case errors.As(err, &rpc):
		return fmt.Sprintf("code %d", rpc.Code)
	case errors.Is(err, mcp.ErrSessionMissing):
		return outLost
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		return outHung
	case strings.Contains(err.Error(), http.StatusText(http.StatusBadGateway)):
		return "http 502"
	case strings.Contains(err.Error(), http.StatusText(http.StatusServiceUnavailable)):
		return "http 503"
	default:
		return outTransport
	}
}

// Settle waits until every call started before t has ended (and is
// recorded), up to within: a call still running then is left out of a
// Window computed now, and one running past the hang bound is recorded
// as hung when it reaches it. It reports whether all had ended.
func (d *Driver) Settle(t time.Time, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		d.mu.Lock()
		busy := false
		for _, s := range d.running {
			if s.Before(t) {
				busy = true
				break
			}
		}
		d.mu.Unlock()
		if !busy {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Window is what the driver saw between two times.
type Window struct {
	Calls    int
	Errors   map[string]int    // by outcome, outOK left out
	Examples map[string]string // an error message of each outcome
	Failed   []string          // each failed call: start, end, outcome, message
	Hung     int
	Wrong    int       // calls answered with another call's result (or none)
	Lost     int       // sessions lost
	OpenFail int       // session opens that failed (retried)
	LastErr  time.Time // the end of the last failed call (zero: none)
	// Answered bounds: the slowest call's duration.
	Slowest time.Duration
}

// Window returns the calls in progress at some time in [from, to) (those
// in flight when a fault begins count, wherever they started), and the
// sessions lost and opens failed then.
func (d *Driver) Window(from, to time.Time) Window {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := Window{Errors: map[string]int{}, Examples: map[string]string{}}
	for _, c := range d.calls {
		if c.end.Before(from) || !c.start.Before(to) {
			continue
		}
		w.Calls++
		w.Slowest = max(w.Slowest, c.end.Sub(c.start))
		if c.outcome == outOK {
			continue
		}
		w.Errors[c.outcome]++
		w.Failed = append(w.Failed, fmt.Sprintf("%s %s %s: %s", c.start.Format("15:04:05.000"), c.end.Format("15:04:05.000"), c.outcome, c.msg))
		if _, ok := w.Examples[c.outcome]; !ok {
			w.Examples[c.outcome] = c.msg
		}
		if c.outcome == outHung {
			w.Hung++
		}
		if c.outcome == outWrong {
			w.Wrong++
		}
		if c.end.After(w.LastErr) {
			w.LastErr = c.end
		}
	}
	for _, t := range d.lost {
		if !t.Before(from) && t.Before(to) {
			w.Lost++
			if t.After(w.LastErr) {
				w.LastErr = t
			}
		}
	}
	for _, t := range d.opens {
		if !t.Before(from) && t.Before(to) {
			w.OpenFail++
			if t.After(w.LastErr) {
				w.LastErr = t
			}
		}
	}
	return w
}
