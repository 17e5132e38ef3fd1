package chaos

import (
	"bytes"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"
)

// RunCounter counts, at the upstream, the tools/call requests by the
// text of their echo: the driver makes every text unique, so a text seen
// twice is a call that ran twice. Safe for concurrent use.
type RunCounter struct {
	mu     sync.Mutex
	byText map[string]int // guarded by mu
	// seen is, for the texts received more than once, when each copy
	// came and on which upstream session ("-" for none).
	seen map[string][]string // guarded by mu
	// first is when each text first came, and its session.
	first map[string]string // guarded by mu
}

// NewRunCounter returns an empty counter.
func NewRunCounter() *RunCounter {
	return &RunCounter{byText: map[string]int{}, seen: map[string][]string{}, first: map[string]string{}}
}

// Wrap counts the tools/call requests h receives.
func (c *RunCounter) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil {
			b, err := io.ReadAll(r.Body)
			if err == nil {
				if t, ok := echoText(b); ok {
					sid := r.Header.Get("Mcp-Session-Id")
					if sid == "" {
						sid = "-"
					}
					at := time.Now().Format("15:04:05.000") + " session " + sid
					c.mu.Lock()
					c.byText[t]++
					switch c.byText[t] {
					case 1:
						c.first[t] = at
					case 2:
						c.seen[t] = append(c.seen[t], c.first[t], at)
					default:
						c.seen[t] = append(c.seen[t], at)
					}
					c.mu.Unlock()
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	})
}

// echoText finds the echo text of a tools/call request body.
func echoText(b []byte) (string, bool) {
	if !bytes.Contains(b, []byte(`"tools/call"`)) {
		return "", false
	}
	const key = `"text":"`
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return "", false
	}
	rest := b[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	return string(rest[:j]), true
}

// Counts returns how many calls the upstream received, and the texts of
// those it received more than once.
func (c *RunCounter) Counts() (total int, twice []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, n := range c.byText {
		total++
		if n > 1 {
			twice = append(twice, t)
		}
	}
	sort.Strings(twice)
	return total, twice
}

// Arrivals returns, for a text received more than once, when each copy
// came and on which upstream session.
func (c *RunCounter) Arrivals(text string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen[text]...)
}
