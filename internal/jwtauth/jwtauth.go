package jwtauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/httprc/v3"
	"github.com/lestrrat-go/httprc/v3/errsink"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Sentinel errors of [Verifier.Verify]. The errors it returns wrap exactly
// one of them, with a reason that never quotes the token.
var (
	// ErrMalformed: the token is empty, too long, not three base64url
	// parts, its header or claims are not JSON objects, it has no exp, or
	// its groups claim is neither a string nor an array of strings.
	ErrMalformed = errors.New("jwtauth: malformed token")
	// ErrExpired: exp has passed, or nbf or iat is still in the future,
	// beyond the issuer's leeway.
	ErrExpired = errors.New("jwtauth: token expired or not yet valid")
	// ErrAudience: aud names none of the issuer's audiences.
	ErrAudience = errors.New("jwtauth: token audience not accepted")
	// ErrIssuer: iss is missing or names no configured issuer.
	ErrIssuer = errors.New("jwtauth: unknown token issuer")
	// ErrSignature: the algorithm is not accepted, no key of the issuer's
	// set fits the token (unknown kid, even after fetching the set again),
	// or the signature does not verify.
	ErrSignature = errors.New("jwtauth: token signature not verified")
	// ErrUnavailable: the issuer's key set has never been fetched and
	// fetching it now failed or was rate-limited.
	ErrUnavailable = errors.New("jwtauth: issuer key set unavailable")
)

var (
	errEmpty       = fmt.Errorf("%w: empty", ErrMalformed)
	errTooLong     = fmt.Errorf("%w: too long", ErrMalformed)
	errParts       = fmt.Errorf("%w: not three dot-separated parts", ErrMalformed)
	errBase64      = fmt.Errorf("%w: a part is not unpadded base64url", ErrMalformed)
	errJSON        = fmt.Errorf("%w: header or claims are not a JSON object", ErrMalformed)
	errClaims      = fmt.Errorf("%w: claims do not parse", ErrMalformed)
	errNoExp       = fmt.Errorf("%w: no exp claim", ErrMalformed)
	errGroups      = fmt.Errorf("%w: groups claim is neither a string nor an array of strings", ErrMalformed)
	errExpired     = fmt.Errorf("%w: expired", ErrExpired)
	errNotYet      = fmt.Errorf("%w: not yet valid", ErrExpired)
	errAudience    = fmt.Errorf("%w: no accepted audience in aud", ErrAudience)
	errNoIss       = fmt.Errorf("%w: no iss claim", ErrIssuer)
	errUnknownIss  = fmt.Errorf("%w: iss is not a configured issuer", ErrIssuer)
	errAlg         = fmt.Errorf("%w: algorithm not accepted for this issuer", ErrSignature)
	errUnknownKid  = fmt.Errorf("%w: no key in the issuer's key set for the token's kid", ErrSignature)
	errNoFit       = fmt.Errorf("%w: no key in the issuer's key set fits the token's algorithm", ErrSignature)
	errBadSig      = fmt.Errorf("%w: signature does not verify", ErrSignature)
	errRateLimited = errors.New("jwtauth: key set fetched too recently")
	errClosed      = errors.New("jwtauth: verifier closed")
)

// Verifier verifies JWTs for the issuers of its [Config]. It is safe for
// concurrent use.
type Verifier struct {
	issuers       map[string]*issuer
	sets          []*keySource
	cache         *jwk.Cache
	minRefresh    time.Duration
	fetchTimeout  time.Duration
	maxTokenBytes int
	// ctx bounds the cache's goroutines and the forced fetches: it ends
	// with the ctx given to New or with Close.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex     // guards closed and adding to wg; never held with a keySource's mu
	closed bool           // Close has begun
	wg     sync.WaitGroup // forced fetches in flight
}

// issuer is the checked, defaulted form of an [Issuer].
type issuer struct {
	name        string
	algs        []algorithm
	audiences   []string
	leeway      time.Duration
	groupsClaim string
	claims      []string // empty: every string or string-array claim
	keys        *keySource
}

// keySource is one JWKS URL: its jwk.Cache entry, the verification-ready
// form of the last set fetched, and the forced-fetch rate limit.
type keySource struct {
	url string
	res interface{ Resource() jwk.Set } // the cache entry; nil set until a fetch succeeds
	ks  atomic.Pointer[keySet]

	mu     sync.Mutex // guards the fields below
	flight *flight    // the forced fetch in progress, or nil
	last   time.Time  // start of the last forced fetch
}

// flight is one forced fetch; err is set before done is closed.
type flight struct {
	done chan struct{}
	err  error
}

// New checks cfg, starts a [jwk.Cache] bound to ctx and registers every
// issuer's JWKS URL with it. It does not wait for the first fetches: until
// one succeeds, [Verifier.Ready] is false and a token of that issuer makes
// Verify try a fetch itself (rate-limited). The cache's goroutines run
// until ctx ends or [Verifier.Close] is called.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	log := c.Logger.With(proto.LogComponent, "jwtauth")

	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	if hc.Timeout == 0 {
		cp := *hc
		cp.Timeout = c.FetchTimeout
		hc = &cp
	}
	hc = jwk.WrapHTTPClientDefaults(hc)

	urls := make(map[string]bool)
	for _, is := range c.Issuers {
		urls[is.JWKSURL] = true
	}
	workers := min(len(urls)+1, 8)

	vctx, cancel := context.WithCancel(ctx)
	client := httprc.NewClient(
		httprc.WithWorkers(workers),
		httprc.WithErrorSink(errsink.NewFunc(func(_ context.Context, err error) {
			log.Warn("jwks fetch failed", proto.LogErr, err)
		})),
	)
	cache, err := jwk.NewCache(vctx, client)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("jwtauth: start key cache: %w", err)
	}
	v := &Verifier{
		issuers:       make(map[string]*issuer, len(c.Issuers)),
		cache:         cache,
		minRefresh:    c.MinRefreshInterval,
		fetchTimeout:  c.FetchTimeout,
		maxTokenBytes: c.MaxTokenBytes,
		ctx:           vctx,
		cancel:        cancel,
	}
	byURL := make(map[string]*keySource, len(urls))
	for _, ic := range c.Issuers {
		src := byURL[ic.JWKSURL]
		if src == nil {
			src, err = v.register(ic.JWKSURL, hc, c.RefreshInterval)
			if err != nil {
				_ = v.Close()
				return nil, err
			}
			byURL[ic.JWKSURL] = src
			v.sets = append(v.sets, src)
		}
		is := &issuer{
			name:        ic.Issuer,
			audiences:   ic.Audiences,
			leeway:      ic.Leeway,
			groupsClaim: ic.GroupsClaim,
			claims:      ic.Claims,
			keys:        src,
		}
		for _, name := range ic.Algorithms {
			a, _ := lookupAlg(name) // checked by Validate
			is.algs = append(is.algs, a)
		}
		v.issuers[ic.Issuer] = is
	}
	return v, nil
}

func (v *Verifier) register(url string, hc *http.Client, refresh time.Duration) (*keySource, error) {
	err := v.cache.Register(v.ctx, url,
		jwk.WithHTTPClient(hc),
		jwk.WithWaitReady(false),
		jwk.WithConstantInterval(refresh),
		// The retry delay after a failed background fetch.
		jwk.WithMinInterval(v.minRefresh),
		jwk.WithMaxFetchBodySize(1<<20),
		// One odd key (an unknown kty) must not hide the others.
		jwk.WithIgnoreParseError(true),
	)
	if err != nil {
		return nil, fmt.Errorf("jwtauth: register key set %q: %w", url, err)
	}
	res, err := v.cache.LookupResource(v.ctx, url)
	if err != nil {
		return nil, fmt.Errorf("jwtauth: register key set %q: %w", url, err)
	}
	return &keySource{url: url, res: res}, nil
}

// Ready reports whether every issuer's key set has been fetched at least
// once. It stays true when later fetches fail, since the last good set is
// kept.
func (v *Verifier) Ready() bool {
	for _, s := range v.sets {
		if s.res.Resource() == nil {
			return false
		}
	}
	return true
}

// Close stops the key cache and waits for its goroutines and any forced
// fetch to end. Verify keeps working with the sets already fetched but
// fetches no more. Close may be called more than once.
func (v *Verifier) Close() error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	v.closed = true
	v.mu.Unlock()
	v.cancel()
	// The cache's goroutines all watch the cancelled context, so this
	// returns once they have seen it.
	err := v.cache.Shutdown(context.WithoutCancel(v.ctx))
	v.wg.Wait()
	return err
}

// Verify checks token (the compact JWS, without "Bearer ") and, when it is
// valid, fills p with the issuer, the claims and the groups. p is reset
// first and left empty on error.
//
// The error wraps [ErrMalformed], [ErrExpired], [ErrAudience], [ErrIssuer],
// [ErrSignature] or [ErrUnavailable]. ctx bounds only the wait for a key
// set fetch, which happens when no set of the issuer is cached or the kid
// is not in it, at most once per [Config.MinRefreshInterval] per set.
func (v *Verifier) Verify(ctx context.Context, token string, p *tenant.Principal) error {
	_, err := v.VerifyFor(ctx, token, "", p)
	return err
}

// VerifyFor is [Verifier.Verify] that also accepts, besides the issuer's
// audiences, an aud equal to resource, the URL of the endpoint the token
// was presented to, when resource lies under a configured audience
// ("https://gw/mcp/github" under "https://gw/mcp"). A client following
// RFC 9728 asks its authorization server for a token for exactly that
// resource (RFC 8707), so each endpoint below a configured audience needs
// no audience of its own; a token for one endpoint is not accepted at
// another unless a configured audience names it. It also returns the token's
// expiry (exp), for callers that cache the result.
func (v *Verifier) VerifyFor(ctx context.Context, token, resource string, p *tenant.Principal) (exp time.Time, err error) {
	exp, err = v.verifyFor(ctx, token, resource, p)
	if err != nil {
		p.Reset()
	}
	return exp, err
}

func (v *Verifier) verifyFor(ctx context.Context, token, resource string, p *tenant.Principal) (time.Time, error) {
	p.Reset()
	switch {
	case token == "":
		return time.Time{}, errEmpty
	case len(token) > v.maxTokenBytes:
		return time.Time{}, errTooLong
	}
	u, err := parseUnverified(token)
	if err != nil {
		return time.Time{}, err
	}
	if u.iss == "" {
		return time.Time{}, errNoIss
	}
	is := v.issuers[u.iss]
	if is == nil {
		return time.Time{}, errUnknownIss
	}
	alg, ok := is.alg(u.alg)
	if !ok {
		return time.Time{}, errAlg
	}
	keys, err := v.keysFor(ctx, is.keys, u.kid)
	if err != nil {
		return time.Time{}, err
	}
	tok, err := is.verify(token, alg, keys)
	if err != nil {
		return time.Time{}, err
	}
	if iss, _ := tok.Issuer(); iss != is.name {
		return time.Time{}, errUnknownIss
	}
	if aud, _ := tok.Audience(); !slices.ContainsFunc(aud, is.acceptsAudience) && !(is.covers(resource) && slices.Contains(aud, resource)) {
		return time.Time{}, errAudience
	}
	if err := is.fill(p, tok); err != nil {
		return time.Time{}, err
	}
	exp, _ := tok.Expiration()
	return exp, nil
}

func (is *issuer) alg(name string) (*algorithm, bool) {
	for i := range is.algs {
		if is.algs[i].name == name {
			return &is.algs[i], true
		}
	}
	return nil, false
}

func (is *issuer) acceptsAudience(aud string) bool {
	return slices.Contains(is.audiences, aud)
}

// covers reports whether resource lies under one of the issuer's
// audiences (an audience, then "/"): the configuration, not the request,
// decides which resource URLs may be audiences, so a client cannot make
// its token's aud acceptable by choosing the Host it sends.
func (is *issuer) covers(resource string) bool {
	if resource == "" {
		return false
	}
	for _, a := range is.audiences {
		if len(resource) > len(a)+1 && strings.HasPrefix(resource, a) && resource[len(a)] == '/' {
			return true
		}
	}
	return false
}

// verify checks the signature with the first key that fits and validates
// the time claims. More than one key is tried only for a token without a
// kid.
func (is *issuer) verify(token string, alg *algorithm, keys []verifyKey) (jwt.Token, error) {
	fitted := false
	for i := range keys {
		k := &keys[i]
		if !k.fits(alg) {
			continue
		}
		fitted = true
		tok, err := jwt.ParseString(token,
			jwt.WithKey(alg.alg, k.raw),
			jwt.WithAcceptableSkew(is.leeway),
			jwt.WithRequiredClaim(jwt.ExpirationKey),
		)
		if err == nil {
			return tok, nil
		}
		if errors.Is(err, jws.VerifyError()) || errors.Is(err, jws.VerificationError()) {
			continue
		}
		return nil, classify(err)
	}
	if !fitted {
		return nil, errNoFit
	}
	return nil, errBadSig
}

// classify maps a jwx parse or validation error (after the signature
// verified) to a sentinel. jwx's text is dropped: it may quote claims.
func classify(err error) error {
	switch {
	case errors.Is(err, jwt.TokenExpiredError()):
		return errExpired
	case errors.Is(err, jwt.TokenNotYetValidError()), errors.Is(err, jwt.InvalidIssuedAtError()):
		return errNotYet
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return errNoExp
	}
	return errClaims
}

// fill copies the verified token's issuer, claims, groups and scopes into
// p.
func (is *issuer) fill(p *tenant.Principal, tok jwt.Token) error {
	p.Issuer = is.name
	// RFC 8693 section 4.2 (and RFC 9068): "scope", space separated; some
	// issuers (Microsoft, Okta) send "scp", a string or an array.
	for _, name := range []string{"scope", "scp"} {
		var v any
		if tok.Get(name, &v) != nil {
			continue
		}
		switch v := v.(type) {
		case string:
			for _, sc := range strings.Fields(v) {
				if !slices.Contains(p.Scopes, sc) {
					p.Scopes = append(p.Scopes, sc)
				}
			}
		case []any:
			for _, e := range v {
				if sc, ok := e.(string); ok && sc != "" && !slices.Contains(p.Scopes, sc) {
					p.Scopes = append(p.Scopes, sc)
				}
			}
		}
	}
	if tok.Has(is.groupsClaim) {
		var g any
		if err := tok.Get(is.groupsClaim, &g); err != nil {
			return errGroups
		}
		if !appendStrings(&p.Groups, g) {
			return errGroups
		}
	}
	names := is.claims
	if len(names) == 0 {
		names = tok.Keys()
		// Keys lists the private claims in map order.
		slices.Sort(names)
	}
	for _, name := range names {
		if len(is.claims) == 0 && name == is.groupsClaim {
			continue
		}
		var c any
		if tok.Get(name, &c) != nil {
			continue
		}
		addClaim(p, name, c)
	}
	return nil
}

// addClaim adds v to p when it is a string or an array of strings, and
// skips it otherwise.
func addClaim(p *tenant.Principal, name string, v any) {
	switch v := v.(type) {
	case string:
		p.AddClaim(name, v)
	case []string:
		p.AddClaim(name, v...)
	case []any:
		if !allStrings(v) {
			return
		}
		for _, e := range v {
			p.AddClaim(name, e.(string))
		}
	}
}

// appendStrings appends v to dst when v is a string or an array of
// strings, and reports whether it was.
func appendStrings(dst *[]string, v any) bool {
	switch v := v.(type) {
	case string:
		*dst = append(*dst, v)
	case []string:
		*dst = append(*dst, v...)
	case []any:
		if !allStrings(v) {
			return false
		}
		for _, e := range v {
			*dst = append(*dst, e.(string))
		}
	default:
		return false
	}
	return true
}

func allStrings(v []any) bool {
	for _, e := range v {
		if _, ok := e.(string); !ok {
			return false
		}
	}
	return true
}

// keysFor returns the keys of src that may verify a token with kid,
// fetching the set first when none is cached, and again when kid is not
// in it.
func (v *Verifier) keysFor(ctx context.Context, src *keySource, kid string) ([]verifyKey, error) {
	if ks := src.current(); ks != nil {
		keys, known := ks.candidates(kid)
		if len(keys) > 0 || known {
			return keys, nil
		}
	}
	ferr := v.refresh(ctx, src)
	ks := src.current()
	if ks == nil {
		switch {
		case ferr == nil: // cannot happen: a fetch that succeeded left a set
			return nil, fmt.Errorf("%w: %s: no key set", ErrUnavailable, src.url)
		case errors.Is(ferr, errRateLimited):
			return nil, fmt.Errorf("%w: %s: last fetch failed less than %v ago", ErrUnavailable, src.url, v.minRefresh)
		}
		// A fetch error names the URL itself.
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, ferr)
	}
	if keys, _ := ks.candidates(kid); len(keys) > 0 {
		return keys, nil
	}
	return nil, errUnknownKid
}

// current returns the verification-ready form of src's cached set, or nil
// when no fetch has succeeded yet. It rebuilds the form once per new set.
func (src *keySource) current() *keySet {
	set := src.res.Resource()
	if set == nil {
		return nil
	}
	if ks := src.ks.Load(); ks != nil && ks.src == set {
		return ks
	}
	ks := newKeySet(set)
	src.ks.Store(ks)
	keySetGen.Add(1)
	return ks
}

// keySetGen counts key sets taken into use, by every Verifier.
var keySetGen atomic.Uint64

// KeySetID identifies the key sets of every issuer as fetched now: it
// changes whenever one of them is replaced (a background refresh, a
// fetch forced by an unknown kid, a rotation), and may change for other
// Verifiers' sets too. A caller that caches verifications keeps each one
// only while KeySetID is unchanged, so a key dropped from a JWKS stops
// its tokens as soon as the new set is fetched. It does no I/O.
func (v *Verifier) KeySetID() uint64 {
	for _, src := range v.sets {
		src.current()
	}
	return keySetGen.Load()
}

// refresh fetches src's set now, or joins the fetch in progress, unless a
// forced fetch started less than MinRefreshInterval ago. The fetch runs in
// its own goroutine so that a caller whose ctx ends does not cut it short
// for the others.
func (v *Verifier) refresh(ctx context.Context, src *keySource) error {
	src.mu.Lock()
	f := src.flight
	if f == nil {
		if !src.last.IsZero() && time.Since(src.last) < v.minRefresh {
			src.mu.Unlock()
			return errRateLimited
		}
		f = &flight{done: make(chan struct{})}
		src.flight = f
		src.last = time.Now()
		src.mu.Unlock()
		if !v.startFetch(src, f) {
			src.land(f, errClosed)
		}
	} else {
		src.mu.Unlock()
	}
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startFetch runs f in a goroutine that Close waits for, unless Close has
// begun.
func (v *Verifier) startFetch(src *keySource, f *flight) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return false
	}
	v.wg.Add(1)
	go v.fetch(src, f)
	return true
}

func (v *Verifier) fetch(src *keySource, f *flight) {
	defer v.wg.Done()
	ctx, cancel := context.WithTimeout(v.ctx, v.fetchTimeout)
	defer cancel()
	_, err := v.cache.Refresh(ctx, src.url)
	src.land(f, err)
}

// land ends the forced fetch f with err.
func (src *keySource) land(f *flight, err error) {
	f.err = err
	src.mu.Lock()
	src.flight = nil
	src.mu.Unlock()
	close(f.done)
}
