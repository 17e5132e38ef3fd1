package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Token exchange (RFC 8693; proto.TokenExchange; docs/upstream-auth.md).
// On an upstream with token_exchange, a client's call does not carry the
// client's token upstream but one the authorization server mints for the
// upstream in exchange for it: the worker posts the client's token
// (subject_token) to the token endpoint with its own client credentials
// and the configured audience, resource and scope, and sends the
// access_token it gets as the call's Authorization. Tokens are cached per
// principal, upstream and client token until shortly before they expire.
// A call without a client token (an API key caller), or whose exchange
// the server refuses or cannot answer, fails before anything is sent
// upstream, with an error saying which. No token is ever logged or put in
// an error.

// The RFC 8693 names the exchange uses.
const (
	grantTokenExchange   = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
)

// exchangeCacheMax bounds the exchanged tokens kept per upstream; beyond
// it the expired go first, then all.
const exchangeCacheMax = 10_000

// exchangeEarly is how long before its expiry an exchanged token is no
// longer used; exchangeNoExpiry how long one without expires_in is.
const (
	exchangeEarly    = 30 * time.Second
	exchangeNoExpiry = time.Minute
)

// exchangeTimeout bounds one exchange at the token endpoint.
const exchangeTimeout = 10 * time.Second

// exchanger exchanges and caches the tokens of one upstream. Safe for
// concurrent use.
type exchanger struct {
	spec proto.TokenExchange
	hc   *http.Client
	mu   sync.Mutex
	m    map[[32]byte]exchanged // guarded by mu
}

type exchanged struct {
	token string
	until time.Time
}

// errNoClientToken fails a call to a token-exchange upstream that has no
// client token to exchange.
var errNoClientToken = errors.New("the caller presented no token to exchange (an OAuth access token is needed; an API key cannot be exchanged)")

// exchangeError is a failed exchange, its message safe for the client.
type exchangeError struct{ msg string }

func (e *exchangeError) Error() string { return e.msg }

// token returns the upstream's token for a call of principal whose client
// Authorization is auth ("Bearer <token>"), exchanging it unless a cached
// one is still good. Errors: errNoClientToken, *exchangeError.
func (x *exchanger) token(ctx context.Context, principal, auth string) (string, error) {
	scheme, subject, ok := strings.Cut(auth, " ")
	subject = strings.TrimSpace(subject)
	if !ok || !strings.EqualFold(scheme, "Bearer") || subject == "" {
		return "", errNoClientToken
	}
	key := sha256.Sum256([]byte(principal + "\x00" + subject))
	now := time.Now()
	x.mu.Lock()
	if e, ok := x.m[key]; ok && now.Before(e.until) {
		x.mu.Unlock()
		return e.token, nil
	}
	x.mu.Unlock()
	tok, ttl, err := x.exchange(ctx, subject)
	if err != nil {
		return "", err
	}
	until := now.Add(exchangeNoExpiry)
	if ttl > 0 {
		until = now.Add(ttl - min(exchangeEarly, ttl/2))
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[[32]byte]exchanged{}
	}
	if len(x.m) >= exchangeCacheMax {
		for k, e := range x.m {
			if !now.Before(e.until) {
				delete(x.m, k)
			}
		}
		if len(x.m) >= exchangeCacheMax {
			clear(x.m)
		}
	}
	x.m[key] = exchanged{token: tok, until: until}
	return tok, nil
}

// exchange posts the token exchange request for subject and returns the
// access token and its lifetime (0: unknown). Errors: *exchangeError.
func (x *exchanger) exchange(ctx context.Context, subject string) (string, time.Duration, error) {
	form := url.Values{
		"grant_type":         {grantTokenExchange},
		"subject_token":      {subject},
		"subject_token_type": {tokenTypeAccessToken},
	}
	if x.spec.Audience != "" {
		form.Set("audience", x.spec.Audience)
	}
	if x.spec.Resource != "" {
		form.Set("resource", x.spec.Resource)
	}
	if x.spec.Scope != "" {
		form.Set("scope", x.spec.Scope)
	}
	secret := ""
	if x.spec.ClientSecretEnv != "" || x.spec.ClientSecretFile != "" {
		v, err := readSecret(x.spec.ClientSecretEnv, x.spec.ClientSecretFile)
		if err != nil {
			return "", 0, &exchangeError{"token exchange: the client secret: " + err.Error()}
		}
		secret = v
	} else {
		form.Set("client_id", x.spec.ClientID) // a public client
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.spec.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, &exchangeError{"token exchange: the token endpoint URL does not parse"}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if secret != "" {
		// RFC 6749 section 2.3.1: form-encoded inside Basic.
		req.SetBasicAuth(url.QueryEscape(x.spec.ClientID), url.QueryEscape(secret))
	}
	resp, err := x.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		return "", 0, &exchangeError{"token exchange: the authorization server is unreachable (" + reachReason(err) + ")"}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", 0, &exchangeError{"token exchange: reading the authorization server's answer failed"}
	}
	var out struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.Unmarshal(body, &out)
	if resp.StatusCode != http.StatusOK {
		msg := fmt.Sprintf("token exchange refused by the authorization server (HTTP %d", resp.StatusCode)
		if out.Error != "" {
			msg += ", " + clip(out.Error, 64)
			if out.Description != "" {
				msg += ": " + clip(out.Description, 200)
			}
		}
		return "", 0, &exchangeError{msg + ")"}
	}
	if out.AccessToken == "" || !validHeaderValue(out.AccessToken) {
		return "", 0, &exchangeError{"token exchange: the authorization server's answer has no usable access_token"}
	}
	if out.TokenType != "" && !strings.EqualFold(out.TokenType, "Bearer") && !strings.EqualFold(out.TokenType, "N_A") {
		return "", 0, &exchangeError{"token exchange: the issued token is not a Bearer token (" + clip(out.TokenType, 32) + ")"}
	}
	return out.AccessToken, time.Duration(out.ExpiresIn) * time.Second, nil
}

// clip cuts s to n bytes, and keeps it to printable ASCII.
func clip(s string, n int) string {
	b := []byte(s)
	if len(b) > n {
		b = b[:n]
	}
	for i, c := range b {
		if c < ' ' || c > '~' {
			b[i] = '?'
		}
	}
	return string(b)
}

// reachReason names why the token endpoint could not be reached, without
// its address.
func reachReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "connection refused"):
		return "connection refused"
	case strings.Contains(msg, "no such host"):
		return "host not found"
	case strings.Contains(msg, "certificate"), strings.Contains(msg, "tls"):
		return "TLS handshake failed"
	case strings.Contains(msg, "timeout"), strings.Contains(msg, "deadline"):
		return "timed out"
	}
	return "network error"
}

// exchangeFor returns ctx with the Authorization of a call of req to a
// token-exchange upstream: the client's token exchanged for the upstream's.
// Errors (nothing is sent upstream then): a *proto.Error saying why.
func (u *Upstream) exchangeFor(ctx context.Context, req *proto.Request) (context.Context, *proto.Error) {
	auth, ok := authorization(ctx)
	if !ok {
		return ctx, proto.Errorf(proto.CodeInvalidRequest, "upstream %s: %v", u.name, errNoClientToken)
	}
	tok, err := u.exchange.token(ctx, req.Issuer+"\x00"+req.Principal, auth)
	if err != nil {
		var xe *exchangeError
		switch {
		case errors.Is(err, errNoClientToken):
			return ctx, proto.Errorf(proto.CodeInvalidRequest, "upstream %s: %v", u.name, err)
		case errors.As(err, &xe):
			return ctx, proto.Errorf(proto.CodeUpstreamUnavailable, "upstream %s: %s", u.name, xe.msg)
		}
		return ctx, u.callError(ctx, err, nil)
	}
	return context.WithValue(ctx, authKey{}, "Bearer "+tok), nil
}
