package jwtauth

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// unverified is what Verify reads from a token before checking it: only
// enough to choose the issuer and the key. None of it is trusted.
type unverified struct {
	alg, kid, iss string
}

var b64 = base64.RawURLEncoding.Strict()

// parseUnverified splits a compact JWS and decodes its header and payload.
// It returns [ErrMalformed] errors that name the problem but never quote
// the input.
func parseUnverified(token string) (unverified, error) {
	var u unverified
	h, rest, ok := strings.Cut(token, ".")
	if !ok {
		return u, errParts
	}
	pl, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.IndexByte(sig, '.') >= 0 {
		return u, errParts
	}
	// The decoder would skip CR and LF; a token has no business holding
	// them, so check the alphabet first. An empty signature passes here so
	// that "alg":"none" is refused for its algorithm, not its shape.
	if !isB64URL(h) || !isB64URL(pl) || !isB64URL(sig) || h == "" || pl == "" {
		return u, errBase64
	}
	hb, err := b64.DecodeString(h)
	if err != nil {
		return u, errBase64
	}
	pb, err := b64.DecodeString(pl)
	if err != nil {
		return u, errBase64
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if !isObject(hb) || json.Unmarshal(hb, &hdr) != nil {
		return u, errJSON
	}
	var claims struct {
		Iss string `json:"iss"`
	}
	if !isObject(pb) || json.Unmarshal(pb, &claims) != nil {
		return u, errJSON
	}
	return unverified{alg: hdr.Alg, kid: hdr.Kid, iss: claims.Iss}, nil
}

// isB64URL reports whether s holds only the unpadded base64url alphabet and
// has a length an encoding can have.
func isB64URL(s string) bool {
	if len(s)%4 == 1 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// isObject reports whether b starts, after white space, with '{': JSON
// null would otherwise decode into an empty struct without error.
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}
