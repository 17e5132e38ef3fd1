package publicurl

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestParsePublicURL(t *testing.T) {
	tests := []struct {
		in   string
		want Origin
		err  string // a substring of the error; "" for none
	}{
		{"https://gw.example.com", Origin{"https", "gw.example.com", ""}, ""},
		{"https://gw.example.com/", Origin{"https", "gw.example.com", ""}, ""},
		{"HTTP://gw.example.com:8443/tools", Origin{"http", "gw.example.com:8443", "/tools"}, ""},
		{"https://gw.example.com/tools/", Origin{"https", "gw.example.com", "/tools"}, ""},
		{"https://gw.example.com/a/b-c_d~e", Origin{"https", "gw.example.com", "/a/b-c_d~e"}, ""},
		{"https://[2001:db8::1]:8443/x", Origin{"https", "[2001:db8::1]:8443", "/x"}, ""},
		{"ftp://gw.example.com", Origin{}, "scheme"},
		{"gw.example.com/tools", Origin{}, "scheme"},
		{"https:///tools", Origin{}, "host"},
		{"https://user:pw@gw.example.com", Origin{}, "user"},
		{"https://gw.example.com/tools?x=1", Origin{}, "query"},
		{"https://gw.example.com/tools?", Origin{}, "query"},
		{"https://gw.example.com/tools#frag", Origin{}, "fragment"},
		{"https://gw.example.com//tools", Origin{}, "plain prefix"},
		{"https://gw.example.com/a/../tools", Origin{}, "plain prefix"},
		{"https://gw.example.com/a/./tools", Origin{}, "plain prefix"},
		{"https://gw.example.com/my%20tools", Origin{}, "plain prefix"},
		{`https://gw.example.com/a"b`, Origin{}, "plain prefix"},
		{"https://gw.example.com:99999", Origin{}, "host"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePublicURL(tt.in)
			if tt.err == "" && (err != nil || got != tt.want) {
				t.Fatalf("ParsePublicURL = %+v, %v; want %+v", got, err, tt.want)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("ParsePublicURL = %+v, %v; want an error about %q", got, err, tt.err)
			}
		})
	}
}

func TestValidHost(t *testing.T) {
	for h, want := range map[string]bool{
		"gw.example.com": true, "gw.example.com:443": true, "10.0.0.1:8080": true, "[::1]:8080": true, "[2001:db8::1]": true,
		"localhost": true, "": false, ":80": false, "gw:": false, "gw:80:81": false, "gw:65536": false, "gw:123456": false,
		"::1": false, "[::1]x": false, "[fe80::1%eth0]:80": false, "[10.0.0.1]": false, "gw/x": false, `gw"`: false,
		"gw example": false, "gw\r\nx": false, "user@gw": false, "gw:8o": false,
	} {
		if got := ValidHost(h); got != want {
			t.Errorf("ValidHost(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestCleanPrefix(t *testing.T) {
	for in, want := range map[string]string{"": "", "/": "", "/tools": "/tools", "/tools/": "/tools", "/a/b": "/a/b", "//": ""} {
		if got, ok := CleanPrefix(in); !ok || got != want {
			t.Errorf("CleanPrefix(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"tools", "/a//b", "/a/../b", "/..", "/.", "/a b", "/a\nb", "/a%2fb", "/a?b", `/a"b`, `/a\b`, "/" + strings.Repeat("a", 1024)} {
		if got, ok := CleanPrefix(in); ok {
			t.Errorf("CleanPrefix(%q) = %q, true; want a refusal", in, got)
		}
	}
}

func TestParseTrusted(t *testing.T) {
	got, err := ParseTrusted([]string{"10.0.0.0/8", " 192.168.1.10 ", "fd00::/8", "10.1.2.3/16", "::ffff:172.16.0.0/108"})
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.10/32"), netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("172.16.0.0/12"),
	}
	if err != nil || len(got) != len(want) {
		t.Fatalf("ParseTrusted = %v, %v", got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	_, err = ParseTrusted([]string{"10.0.0.0/8", "proxy.internal", "10.0.0.0/33", "fe80::1%eth0"})
	for _, s := range []string{`[1]: "proxy.internal"`, `[2]: "10.0.0.0/33"`, `[3]: "fe80::1%eth0"`} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("ParseTrusted error %v: want it to name %s", err, s)
		}
	}
	if err != nil && strings.Contains(err.Error(), "[0]") {
		t.Errorf("ParseTrusted error %v names the good entry", err)
	}
}

// request builds a request from peer (ip:port) that arrived at local
// (ip:port, "" for a handler called without a server), with Host host.
func request(peer, local, host string, hdr ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://"+host+"/.well-known/oauth-protected-resource/mcp", nil)
	r.Host, r.RemoteAddr = host, peer
	if local != "" {
		ap := netip.MustParseAddrPort(local)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(ap)))
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

// TestResolverOrigin: public_url wins; forwarded headers count only from
// loopback and configured peers; the Host header is echoed only when it
// and the connection are loopback.
func TestResolverOrigin(t *testing.T) {
	trusted, _ := ParseTrusted([]string{"10.0.0.0/8", "192.168.1.10"})
	plain := NewResolver(nil, trusted, "127.0.0.1:8080")
	pub, err := ParsePublicURL("https://gw.example.com/tools")
	if err != nil {
		t.Fatal(err)
	}
	public := NewResolver(&pub, trusted, "127.0.0.1:8080")
	fwd := []string{"X-Forwarded-Proto", "https", "X-Forwarded-Host", "gw.example.com", "X-Forwarded-Prefix", "/tools"}
	tests := []struct {
		name string
		x    *Resolver
		r    *http.Request
		want string // Origin.URL("")
	}{
		{"loopback Host on a loopback listener", plain, request("127.0.0.1:5000", "127.0.0.1:8080", "localhost:8080"), "http://localhost:8080"},
		{"forged Host on a loopback listener", plain, request("127.0.0.1:5000", "127.0.0.1:8080", "evil.example"), "http://127.0.0.1:8080"},
		{"forged Host from a remote peer", plain, request("203.0.113.9:5000", "10.1.1.1:8080", "evil.example"), "http://10.1.1.1:8080"},
		{"loopback Host on a public listener", plain, request("203.0.113.9:5000", "10.1.1.1:8080", "localhost:8080"), "http://10.1.1.1:8080"},
		{"IPv6 listener", plain, request("[2001:db8::9]:5000", "[2001:db8::1]:8080", "evil.example"), "http://[2001:db8::1]:8080"},
		{"no local address: the listen address", plain, request("203.0.113.9:5000", "", "evil.example"), "http://127.0.0.1:8080"},
		{"a loopback proxy's headers", plain, request("127.0.0.1:5000", "127.0.0.1:8080", "127.0.0.1:8080", fwd...), "https://gw.example.com/tools"},
		{"an IPv6 loopback proxy's headers", plain, request("[::1]:5000", "[::1]:8080", "[::1]:8080", fwd...), "https://gw.example.com/tools"},
		{"a configured proxy's headers", plain, request("10.2.3.4:5000", "10.1.1.1:8080", "edge:8080", fwd...), "https://gw.example.com/tools"},
		{"a configured address's headers", plain, request("192.168.1.10:5000", "10.1.1.1:8080", "edge:8080", fwd...), "https://gw.example.com/tools"},
		{"an untrusted peer's headers", plain, request("192.168.1.11:5000", "10.1.1.1:8080", "edge:8080", fwd...), "http://10.1.1.1:8080"},
		{"an untrusted peer's Forwarded", plain, request("203.0.113.9:5000", "10.1.1.1:8080", "edge:8080", "Forwarded", "proto=https;host=evil.example"), "http://10.1.1.1:8080"},
		{"public_url over the Host", public, request("203.0.113.9:5000", "10.1.1.1:8080", "evil.example"), "https://gw.example.com/tools"},
		{"public_url over a trusted proxy", public, request("127.0.0.1:5000", "127.0.0.1:8080", "localhost",
			"X-Forwarded-Proto", "http", "X-Forwarded-Host", "other.example", "X-Forwarded-Prefix", "/x"), "https://gw.example.com/tools"},
		{"Forwarded, last element", plain, request("127.0.0.1:5000", "127.0.0.1:8080", "localhost",
			"Forwarded", `for=1.2.3.4;host=forged.example, for=10.0.0.1;proto=https;host="gw.example.com:8443"`), "https://gw.example.com:8443"},
		// One family only: X-Forwarded-Host present, Forwarded's proto is
		// not taken with it (nor, below, its host with X-Forwarded-Proto).
		{"Forwarded under X-Forwarded-Host", plain, request("127.0.0.1:5000", "127.0.0.1:8080", "localhost",
			"Forwarded", "proto=https;host=a.example", "X-Forwarded-Host", "b.example"), "http://b.example"},
		{"Forwarded's host under X-Forwarded-Proto", plain, request("127.0.0.1:5000", "127.0.0.1:8080", "localhost",
			"X-Forwarded-Proto", "https", "Forwarded", "host=evil.example"), "https://localhost"},
		{"several values: the last", plain, request("127.0.0.1:5000", "127.0.0.1:8080", "localhost",
			"X-Forwarded-Host", "forged.example, gw.example.com", "X-Forwarded-Proto", "http", "X-Forwarded-Proto", "https",
			"X-Forwarded-Prefix", "/forged,/tools"), "https://gw.example.com/tools"},
		{"bad forwarded values are ignored", plain, request("127.0.0.1:5000", "127.0.0.1:8080", "localhost",
			"X-Forwarded-Host", `evil.example/"x`, "X-Forwarded-Proto", "javascript", "X-Forwarded-Prefix", "/a/../b"), "http://localhost"},
		{"prefix alone", plain, request("127.0.0.1:5000", "127.0.0.1:8080", "localhost:8080", "X-Forwarded-Prefix", "/tools/"), "http://localhost:8080/tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.x.Origin(tt.r).URL(""); got != tt.want {
				t.Fatalf("Origin = %s, want %s", got, tt.want)
			}
		})
	}
	// A TLS connection is https without a proxy's word.
	r := request("203.0.113.9:5000", "10.1.1.1:8443", "evil.example")
	r.TLS = &tls.ConnectionState{}
	if got := plain.Origin(r).URL("/mcp"); got != "https://10.1.1.1:8443/mcp" {
		t.Fatalf("TLS: %s", got)
	}
}

func TestResolverTrusted(t *testing.T) {
	trusted, _ := ParseTrusted([]string{"10.0.0.0/8", "fd00::/8"})
	x := NewResolver(nil, trusted, "")
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "127.9.9.9:1": true, "[::1]:1": true, "[::ffff:127.0.0.1]:1": true, "10.200.0.1:1": true,
		"[::ffff:10.0.0.1]:1": true, "[fd00::5]:1": true, "11.0.0.1:1": false, "[fe80::1%eth0]:1": false, "": false,
		"garbage": false, "10.0.0.1": true,
	} {
		if got := x.Trusted(addr); got != want {
			t.Errorf("Trusted(%q) = %v, want %v", addr, got, want)
		}
	}
}
