package edge

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// BenchmarkIdleSessionMemory opens b.N idle 2025-era sessions on one edge
// (initialize, notifications/initialized, nothing more) and reports the
// live heap and goroutine stack each holds, after a GC: the edge's memory
// per idle session before garbage (make bench-sessions measures the
// process's RSS).
//
//	cd edge && go test -run '^$' -bench BenchmarkIdleSessionMemory -benchtime 2000x .
func BenchmarkIdleSessionMemory(b *testing.B) {
	g := newRigWith(b, nil, &rigOpts{sse: true})
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	post := func(body, sid string) string {
		req, _ := http.NewRequest(http.MethodPost, g.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := cl.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			b.Fatalf("HTTP %d", resp.StatusCode)
		}
		return resp.Header.Get("Mcp-Session-Id")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		sid := post(initBody, "")
		post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid)
	}
	b.StopTimer()
	tr.CloseIdleConnections()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := g.e.sessions.count(); n != b.N {
		b.Fatalf("%d sessions open, want %d", n, b.N)
	}
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(b.N), "heap-B/session")
	b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/float64(b.N), "stack-B/session")
}
