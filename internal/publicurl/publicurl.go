// Package publicurl decides how the edge names itself in the URLs and
// paths it hands out: the protected resource metadata's resource
// (RFC 9728), the resource_metadata URL of a WWW-Authenticate challenge,
// the legacy HTTP+SSE transport's endpoint event, redirects, and the
// resource a JWT audience may name.
//
// One [Resolver] answers for every request, in this order:
//
//  1. auth.public_url, when configured ([ParsePublicURL]): scheme, host
//     and path prefix ("https://gw.example.com/tools"), whatever the
//     request says.
//  2. Otherwise, for a request from a trusted proxy (a loopback peer, or
//     one in edge.trusted_proxies: [ParseTrusted]), the proxy's
//     X-Forwarded-Proto, X-Forwarded-Host and X-Forwarded-Prefix, or, for
//     a field without its X-Forwarded header, the Forwarded header's
//     proto= and host= (RFC 7239). Of several values the last counts: the
//     one the trusted peer itself added. A value that is not a plain
//     scheme, host[:port] or path is ignored. Headers from other peers are
//     always ignored.
//  3. What is left comes from the connection, never from an arbitrary Host
//     header: the scheme of the connection, and the request's Host only
//     when both it and the address the connection arrived at are loopback
//     (the edge refuses other Hosts on loopback listeners anyway: DNS
//     rebinding); otherwise the address the connection arrived at.
//
// The package does no I/O; a Resolver is immutable and safe for concurrent
// use.
package publicurl

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Origin is how clients reach the edge: Scheme ("http" or "https"), Host
// (host[:port], an IPv6 address in brackets) and Prefix, the path the
// gateway is served under ("" or "/tools": starts with '/', no trailing
// '/', only characters that need no escaping in a path, no "." or ".."
// segment, no empty segment).
type Origin struct {
	Scheme, Host, Prefix string
}

// URL returns the absolute URL of path (an escaped path starting with
// '/', or "" for the prefix itself) under o.
func (o Origin) URL(path string) string {
	return o.Scheme + "://" + o.Host + o.Prefix + path
}

// ParsePublicURL parses auth.public_url: an http(s) URL with a host, an
// optional path prefix (a trailing '/' is dropped) and nothing else (no
// user info, query or fragment). Errors describe what is wrong.
func ParsePublicURL(s string) (Origin, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Origin{}, errors.New("not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return Origin{}, errors.New("the scheme must be http or https")
	case u.Opaque != "" || u.Host == "" || !ValidHost(u.Host):
		return Origin{}, errors.New("needs a host[:port]")
	case u.User != nil:
		return Origin{}, errors.New("must not carry user information")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(s, "?#"):
		return Origin{}, errors.New("must not have a query or a fragment")
	}
	prefix, ok := CleanPrefix(u.EscapedPath())
	if !ok {
		return Origin{}, fmt.Errorf("path %q is not a plain prefix (letters, digits and -._~!$&'()*+,;=:@ between single slashes, no . or .. segments, no escapes)", u.EscapedPath())
	}
	return Origin{Scheme: scheme, Host: u.Host, Prefix: prefix}, nil
}

// CleanPrefix returns p, a path prefix, without its trailing slashes ("/"
// becomes ""), and whether it is one: "" or a path of segments of
// letters, digits and -._~!$&'()*+,;=:@, none empty, "." or "..", at most
// 1024 bytes. These characters need no escaping, in a path, in a quoted
// header parameter or in an SSE data line.
func CleanPrefix(p string) (string, bool) {
	p = strings.TrimRight(p, "/")
	if p == "" {
		return "", true
	}
	if p[0] != '/' || len(p) > 1024 {
		return "", false
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", false
		}
		for i := 0; i < len(seg); i++ {
			if !pathChar(seg[i]) {
				return "", false
			}
		}
	}
	return p, true
}

func pathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0
}

// ValidHost reports whether h is a plain host[:port]: a DNS name or IPv4
// address (letters, digits, '-' and '.'), or an IPv6 address in brackets
// without a zone, and an optional decimal port up to 65535.
func ValidHost(h string) bool {
	host, port, hasPort := h, "", false
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return false
		}
		a, err := netip.ParseAddr(h[1:end])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return false
		}
		switch rest := h[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			port, hasPort = rest[1:], true
		default:
			return false
		}
	} else {
		host, port, hasPort = strings.Cut(h, ":")
		if host == "" || len(host) > 253 {
			return false
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
				return false
			}
		}
	}
	if !hasPort {
		return true
	}
	if port == "" || len(port) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return false
		}
		n = n*10 + int(port[i]-'0')
	}
	return n <= 65535
}

// ParseTrusted parses edge.trusted_proxies: each entry an IP address or a
// CIDR prefix ("10.0.0.0/8", "192.168.1.10", "fd00::/8"). A prefix with
// host bits set is masked. The error joins one error per bad entry, each
// naming its index.
func ParseTrusted(entries []string) ([]netip.Prefix, error) {
	var errs []error
	out := make([]netip.Prefix, 0, len(entries))
	for i, e := range entries {
		e = strings.TrimSpace(e)
		if p, err := netip.ParsePrefix(e); err == nil {
			out = append(out, netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked())
			continue
		}
		a, err := netip.ParseAddr(e)
		if err != nil || a.Zone() != "" {
			errs = append(errs, fmt.Errorf("[%d]: %q is not an IP address or CIDR prefix", i, e))
			continue
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, errors.Join(errs...)
}

// unmappedBits is p's length for its address unmapped: an IPv4-mapped
// IPv6 prefix (::ffff:10.0.0.0/104) is the IPv4 one (10.0.0.0/8).
func unmappedBits(p netip.Prefix) int {
	if a := p.Addr(); a.Is4In6() {
		return max(p.Bits()-96, 0)
	}
	return p.Bits()
}

// Resolver gives each request the [Origin] the edge advertises to it (see
// the package doc for the rules).
type Resolver struct {
	public  *Origin
	trusted []netip.Prefix
	listen  string
}

// NewResolver returns a Resolver. public is auth.public_url's Origin, nil
// when none is configured; trusted are the proxies besides loopback peers
// whose forwarded headers count; listen is the edge's listen address,
// used for requests that do not say which address they arrived at (a
// handler called without a server).
func NewResolver(public *Origin, trusted []netip.Prefix, listen string) *Resolver {
	return &Resolver{public: public, trusted: trusted, listen: listen}
}

// Public returns auth.public_url's Origin, or nil.
func (x *Resolver) Public() *Origin { return x.public }

// Origin returns the Origin the edge advertises to r.
func (x *Resolver) Origin(r *http.Request) Origin {
	if x.public != nil {
		return *x.public
	}
	o := Origin{Scheme: "http", Host: x.ownHost(r)}
	if r.TLS != nil {
		o.Scheme = "https"
	}
	if !x.Trusted(r.RemoteAddr) {
		return o
	}
	// One family of headers or the other, never a mix: a proxy that sets
	// X-Forwarded-Proto but passes a client's Forwarded on would
	// otherwise let the client choose the host. A request with any
	// X-Forwarded-Proto or -Host takes both from that family only.
	proto, host := lastValue(r.Header, "X-Forwarded-Proto"), lastValue(r.Header, "X-Forwarded-Host")
	if proto == "" && host == "" {
		proto, host = forwarded(r.Header)
	}
	if p := strings.ToLower(proto); p == "http" || p == "https" {
		o.Scheme = p
	}
	if host != "" && ValidHost(host) {
		o.Host = host
	}
	if p, ok := CleanPrefix(lastValue(r.Header, "X-Forwarded-Prefix")); ok {
		o.Prefix = p
	}
	return o
}

// Trusted reports whether remoteAddr (an http.Request's RemoteAddr,
// ip:port) is a trusted proxy: a loopback address or one in the trusted
// prefixes.
func (x *Resolver) Trusted(remoteAddr string) bool {
	var a netip.Addr
	if ap, err := netip.ParseAddrPort(remoteAddr); err == nil {
		a = ap.Addr()
	} else if a, err = netip.ParseAddr(remoteAddr); err != nil {
		return false
	}
	a = a.Unmap().WithZone("")
	if a.IsLoopback() {
		return true
	}
	for _, p := range x.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ownHost is the host clients reached the edge at by r's connection: r's
// Host when it and the connection's local address are both loopback, else
// that local address.
func (x *Resolver) ownHost(r *http.Request) string {
	local := x.listen
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
		local = la.String()
	}
	if Loopback(local) && Loopback(r.Host) && ValidHost(r.Host) {
		return r.Host
	}
	if ap, err := netip.ParseAddrPort(local); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()).String()
	}
	if local == "" || !ValidHost(local) {
		return "localhost"
	}
	return local
}

// Loopback reports whether a host or host:port names the loopback
// interface ("localhost" or a loopback IP), by the go-sdk's rule
// (internal/util.IsLoopback).
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.IsLoopback()
}

// lastValue is the last comma-separated value of header name, trimmed.
func lastValue(h http.Header, name string) string {
	vs := h.Values(name)
	if len(vs) == 0 {
		return ""
	}
	v := vs[len(vs)-1]
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.TrimSpace(v)
}

// forwarded returns the proto and host parameters of the last element of
// the Forwarded header (RFC 7239), unquoted; "" for a missing one.
func forwarded(h http.Header) (proto, host string) {
	vs := h.Values("Forwarded")
	if len(vs) == 0 {
		return "", ""
	}
	elems := splitQuoted(vs[len(vs)-1], ',')
	for _, pair := range splitQuoted(elems[len(elems)-1], ';') {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = unquote(v[1 : len(v)-1])
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "proto":
			proto = v
		case "host":
			host = v
		}
	}
	return proto, host
}

// splitQuoted splits s at sep outside double quotes (always at least one
// part).
func splitQuoted(s string, sep byte) []string {
	var parts []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// unquote undoes quoted-pair escapes.
func unquote(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
