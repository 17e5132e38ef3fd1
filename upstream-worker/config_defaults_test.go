package worker

import (
	"net/http"
	"testing"
)

// TestDefaultHTTPTransport: the default transport keeps up to
// DefaultMaxIdleConnsPerHost idle connections per upstream, with no
// total bound below that (http.DefaultTransport's MaxIdleConns is 100).
func TestDefaultHTTPTransport(t *testing.T) {
	var c Config
	c.fillDefaults()
	tr, ok := c.HTTPClient.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("default transport %T", c.HTTPClient.Transport)
	}
	if tr.MaxIdleConnsPerHost != DefaultMaxIdleConnsPerHost || tr.MaxIdleConns != 0 {
		t.Fatalf("MaxIdleConnsPerHost %d, MaxIdleConns %d; want %d, 0", tr.MaxIdleConnsPerHost, tr.MaxIdleConns, DefaultMaxIdleConnsPerHost)
	}
}
