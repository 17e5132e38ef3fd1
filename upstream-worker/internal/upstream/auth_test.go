package upstream

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAuthRoundTripper: the injected headers go only to the upstream's
// origin; the client's Authorization replaces the injected one only on a
// passthrough upstream (the call's own first, else the session's); the
// caller's request is never modified.
func TestAuthRoundTripper(t *testing.T) {
	injected := http.Header{"Authorization": {"Bearer worker"}, "X-Api-Key": {"k"}}
	latest := new(atomic.Pointer[string])
	v := "Bearer session-client"
	latest.Store(&v)
	call := WithAuthorization(context.Background(), "Bearer call-client")
	tests := []struct {
		name        string
		url         string
		ctx         context.Context
		passthrough bool
		client      *atomic.Pointer[string]
		auth, key   string
	}{
		{"same origin", "https://up.example/mcp/x", context.Background(), false, nil, "Bearer worker", "k"},
		{"default port spelled out", "https://UP.example:443/mcp", context.Background(), false, nil, "Bearer worker", "k"},
		{"other host", "https://evil.example/mcp", context.Background(), false, nil, "", ""},
		{"other port", "https://up.example:8443/mcp", context.Background(), false, nil, "", ""},
		{"other scheme", "http://up.example/mcp", context.Background(), false, nil, "", ""},
		{"client call on a plain upstream", "https://up.example/mcp", call, false, latest, "Bearer worker", "k"},
		{"client call on a passthrough upstream", "https://up.example/mcp", call, true, latest, "Bearer call-client", "k"},
		{"session's own request, dedicated", "https://up.example/mcp", context.Background(), true, latest, "Bearer session-client", "k"},
		{"session's own request, pool", "https://up.example/mcp", context.Background(), true, nil, "Bearer worker", "k"},
		{"client call elsewhere", "https://evil.example/mcp", call, true, latest, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *http.Request
			rt := &authRT{
				base:   rtFunc(func(r *http.Request) (*http.Response, error) { got = r; return &http.Response{}, nil }),
				hdr:    injected,
				origin: parseOrigin("https://up.example/mcp"), passthrough: tt.passthrough, client: tt.client,
			}
			req, err := http.NewRequestWithContext(tt.ctx, http.MethodPost, tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if a, k := got.Header.Get("Authorization"), got.Header.Get("X-Api-Key"); a != tt.auth || k != tt.key {
				t.Errorf("sent Authorization %q, X-Api-Key %q; want %q, %q", a, k, tt.auth, tt.key)
			}
			if got.Header.Get("Content-Type") != "application/json" {
				t.Errorf("request's own header lost: %v", got.Header)
			}
			if len(req.Header) != 1 {
				t.Errorf("caller's request modified: %v", req.Header)
			}
		})
	}
}

// TestWithAuthorizationInvalid: a value that cannot be a header value,
// or that presents a Switchyard API key, is not carried.
func TestWithAuthorizationInvalid(t *testing.T) {
	for _, v := range []string{"", "Bearer a\r\nX-Evil: 1", "Bearer \x00", "Bearer syk_abc", "bearer   syk_abc"} {
		if _, ok := authorization(WithAuthorization(context.Background(), v)); ok {
			t.Errorf("%q carried", v)
		}
	}
	if got, _ := authorization(WithAuthorization(context.Background(), "Bearer\ta")); got != "Bearer\ta" {
		t.Errorf("a tab is allowed, got %q", got)
	}
}

// TestReadSecretErrors: errors name the source, never the value.
func TestReadSecretErrors(t *testing.T) {
	t.Setenv("SY_TEST_SECRET_BAD", "leaky\x7fvalue")
	t.Setenv("SY_TEST_SECRET_BLANK", "   ")
	for _, tc := range []struct{ env, file, want string }{
		{"SY_TEST_SECRET_BAD", "", "variable SY_TEST_SECRET_BAD: not a valid header value"},
		{"SY_TEST_SECRET_BLANK", "", "variable SY_TEST_SECRET_BLANK is not set or empty"},
		{"", "/nonexistent/sy-secret", "/nonexistent/sy-secret"},
	} {
		_, err := readSecret(tc.env, tc.file)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "leaky") {
			t.Errorf("readSecret(%q, %q) = %v, want an error with %q and no value", tc.env, tc.file, err, tc.want)
		}
	}
}
