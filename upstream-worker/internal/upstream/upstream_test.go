package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/syncbuf"
)

// TestUpstreamLazySingleDial: concurrent gets share one dial; a drop makes
// the next get dial again; a kill stops dialling.
func TestUpstreamLazySingleDial(t *testing.T) {
	var dials atomic.Int32
	release := make(chan struct{})
	l := &lazy{close: func(*session) {}}
	l.dial = func(ctx context.Context) (*session, error) {
		dials.Add(1)
		<-release
		return &session{end: func() {}}, nil
	}
	var wg sync.WaitGroup
	got := make([]*session, 8)
	for i := range got {
		wg.Go(func() {
			s, err := l.get(t.Context())
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		})
	}
	close(release)
	wg.Wait()
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
	for _, s := range got {
		if s != got[0] {
			t.Fatal("callers got different sessions")
		}
	}
	l.drop(got[0])
	if s, _ := l.get(t.Context()); s == got[0] || dials.Load() != 2 {
		t.Fatalf("after drop: same session or %d dials", dials.Load())
	}
	l.kill()
	if _, err := l.get(t.Context()); !errors.Is(err, errSessionGone) {
		t.Fatalf("get after kill: %v", err)
	}
}

// TestUpstreamLazyDialerCancelled: when the dialling caller gives up, a
// waiter dials for itself instead of failing with the other's ctx error.
func TestUpstreamLazyDialerCancelled(t *testing.T) {
	started := make(chan struct{}, 2)
	l := &lazy{close: func(*session) {}}
	l.dial = func(ctx context.Context) (*session, error) {
		started <- struct{}{}
		if v, _ := ctx.Value(ctxKey{}).(string); v == "first" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &session{end: func() {}}, nil
	}
	ctx1, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "first"))
	done := make(chan error, 1)
	go func() {
		_, err := l.get(ctx1)
		done <- err
	}()
	<-started
	second := make(chan error, 1)
	go func() {
		_, err := l.get(t.Context())
		second <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("first: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("waiter: %v", err)
	}
}

type ctxKey struct{}

func TestUpstreamErrorClassification(t *testing.T) {
	upstream := &jsonrpc.Error{Code: -32602, Message: "bad", Data: []byte(`{"x":1}`)}
	cases := []struct {
		name string
		err  error
		want *jsonrpc.Error
	}{
		{"upstream error", fmt.Errorf("calling %q: %w", "tools/call", upstream), upstream},
		{"rejected by transport", fmt.Errorf("x: %w: %w", &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}, errors.New("dial")), nil},
		{"http error body before rejection", fmt.Errorf("s: %w: %w: %v", upstream, &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}, "Bad Request"), upstream},
		{"upstream's own -32005", &jsonrpc.Error{Code: -32005, Message: "quota"}, &jsonrpc.Error{Code: -32005, Message: "quota"}},
		{"session missing", fmt.Errorf("x: %w", mcp.ErrSessionMissing), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := upstreamError(tc.err)
			if (got == nil) != (tc.want == nil) || got != nil && (got.Code != tc.want.Code || got.Message != tc.want.Message) {
				t.Fatalf("upstreamError = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUpstreamCloserKills: Wait cancels session lifetimes once its ctx
// ends, so a closer stuck on an unresponsive session finishes.
func TestUpstreamCloserKills(t *testing.T) {
	c := NewCloser()
	life, end := context.WithCancel(c.Life())
	defer end()
	c.Go(func() { <-life.Done() }) // a close that needs its lifetime cancelled
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() {
		c.Wait(ctx)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Closer.Wait did not return after its ctx ended")
	}
	ran := make(chan struct{})
	c.Go(func() { close(ran) }) // after Wait: still runs
	<-ran
}

func TestUpstreamStderrLines(t *testing.T) {
	var buf strings.Builder
	w := &lineLog{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	w.Write([]byte("one\ntw"))
	w.Write([]byte("o\n" + strings.Repeat("z", maxStderrLine+10)))
	out := buf.String()
	if !strings.Contains(out, "line=one") || !strings.Contains(out, "line=two") || strings.Count(out, "upstream stderr") != 3 {
		t.Fatalf("log:\n%s", out)
	}
}

// TestUpstreamStopLog: a worker shutting down logs its upstream stopped at
// Info, not down at Warn (nothing is wrong).
func TestUpstreamStopLog(t *testing.T) {
	var buf syncbuf.Buffer
	// Registered first, so it runs after startUpstream's cleanup stopped
	// the upstream.
	t.Cleanup(func() {
		out := buf.String()
		if !strings.Contains(out, `level=INFO msg="upstream stopped"`) || strings.Contains(out, "upstream down") {
			t.Errorf("log:\n%s", out)
		}
	})
	startUpstream(t, "", false, func(o *Options) {
		o.Log = slog.New(slog.NewTextHandler(&buf, nil))
		o.Spec = proto.UpstreamSpec{
			Name: "up", Transport: proto.TransportStdio, Processes: 1,
			Command: []string{os.Args[0]},
			Env:     map[string]string{stdioEraEnv: "2025", "GORACE": "atexit_sleep_ms=0"},
		}
	})
}

func TestUpstreamHashItems(t *testing.T) {
	a := hashItems([][]byte{[]byte(`{"name":"a"}`), []byte(`{"name":"b"}`)})
	b := hashItems([][]byte{[]byte(`{"name":"b"}`), []byte(`{"name":"a"}`)})
	c := hashItems([][]byte{[]byte(`{"name":"a"}{"name":"b"}`)})
	if a == b || a == c {
		t.Fatalf("hash ignores order or boundaries: %x %x %x", a, b, c)
	}
}
