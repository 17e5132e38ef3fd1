package upstream

import (
	"bytes"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRawConnDo: the raw call's POST answers as Client.Do would: the
// response, a redirect followed with the body resent, a cookie jar honoured,
// the URL's user info sent as basic auth, and transport errors worded as
// Client.Do words them.
func TestRawConnDo(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c, _ := r.Cookie("k")
		cookie := ""
		if c != nil {
			cookie = c.Value
		}
		http.SetCookie(w, &http.Cookie{Name: "k", Value: "v"})
		_, _ = io.WriteString(w, r.Method+" "+string(b)+" cookie="+cookie+" auth="+r.Header.Get("Authorization"))
	})
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	for _, c := range []struct {
		name, user, path string
		hc               *http.Client
		want             string
	}{
		{"plain", "", "/mcp", &http.Client{Transport: http.DefaultTransport}, "POST body cookie= auth="},
		{"307 redirect", "", "/old", &http.Client{Transport: http.DefaultTransport}, "POST body cookie= auth="},
		{"cookie jar", "", "/mcp", &http.Client{Transport: http.DefaultTransport, Jar: jar}, "POST body cookie=v auth="},
		{"user info", "u:p@", "/mcp", &http.Client{Transport: http.DefaultTransport}, "POST body cookie= auth=Basic dTpw"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := &rawConn{hc: c.hc}
			var got string
			for range 2 { // the second request carries the jar's cookie
				target := strings.Replace(srv.URL, "http://", "http://"+c.user, 1) + c.path
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, target, bytes.NewReader([]byte("body")))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := rc.do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got = string(b)
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}

	t.Run("errors worded as Client.Do", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		u := strings.Replace(dead.URL, "http://", "http://user:secret@", 1) + "/mcp"
		dead.Close()
		hc := &http.Client{Transport: http.DefaultTransport}
		newReq := func() *http.Request {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, bytes.NewReader([]byte("body")))
			if err != nil {
				t.Fatal(err)
			}
			return req
		}
		_, want := hc.Do(newReq())
		_, got := (&rawConn{hc: hc}).do(newReq())
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Fatalf("error %q, Client.Do's %q", got, want)
		}
		if strings.Contains(got.Error(), "secret") {
			t.Fatalf("password in %q", got)
		}
	})
}
