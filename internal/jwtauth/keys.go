package jwtauth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// keyKind is the kind of key an algorithm needs; matching it before
// verifying is what keeps a public key from being used as an HMAC secret
// or a P-256 key from checking an ES384 signature.
type keyKind uint8

const (
	kindNone keyKind = iota // unusable
	kindRSA
	kindP256
	kindP384
	kindP521
	kindEd25519
	kindOct
)

// algorithm is one accepted JWS algorithm.
type algorithm struct {
	name string
	alg  jwa.SignatureAlgorithm
	kind keyKind
}

// lookupAlg returns the supported algorithm called name. "none" and
// algorithms outside this table are unsupported.
func lookupAlg(name string) (algorithm, bool) {
	var kind keyKind
	switch name {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		kind = kindRSA
	case "ES256":
		kind = kindP256
	case "ES384":
		kind = kindP384
	case "ES512":
		kind = kindP521
	case "EdDSA":
		kind = kindEd25519
	case "HS256", "HS384", "HS512":
		kind = kindOct
	default:
		return algorithm{}, false
	}
	alg, ok := jwa.LookupSignatureAlgorithm(name)
	if !ok {
		return algorithm{}, false
	}
	return algorithm{name: name, alg: alg, kind: kind}, true
}

// minRSABits is the smallest RSA modulus accepted in a key set.
const minRSABits = 2048

// verifyKey is one usable key of a key set, exported once per fetched set
// so that Verify does not convert JWKs per request.
type verifyKey struct {
	alg  string // the JWK's "alg"; empty when it has none
	kind keyKind
	raw  any // *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey or []byte
}

// fits reports whether k may verify a signature made with a.
func (k *verifyKey) fits(a *algorithm) bool {
	return k.kind == a.kind && (k.alg == "" || k.alg == a.name)
}

// keySet is the immutable, verification-ready form of one fetched jwk.Set.
type keySet struct {
	src   jwk.Set                // the set it was built from
	byKid map[string][]verifyKey // keys by kid; kid-less keys only in all
	all   []verifyKey
}

// newKeySet exports the keys of set that can verify signatures. Keys that
// are meant for encryption, of a type or size not supported, or that fail
// to export are left out rather than failing the whole set.
func newKeySet(set jwk.Set) *keySet {
	ks := &keySet{src: set, byKid: make(map[string][]verifyKey, set.Len())}
	for i := range set.Len() {
		key, ok := set.Key(i)
		if !ok {
			continue
		}
		vk, ok := exportKey(key)
		if !ok {
			continue
		}
		ks.all = append(ks.all, vk)
		if kid, ok := key.KeyID(); ok && kid != "" {
			ks.byKid[kid] = append(ks.byKid[kid], vk)
		}
	}
	return ks
}

func exportKey(key jwk.Key) (verifyKey, bool) {
	if use, ok := key.KeyUsage(); ok && use != "" && use != "sig" {
		return verifyKey{}, false
	}
	if ops, ok := key.KeyOps(); ok && len(ops) > 0 {
		verify := false
		for _, op := range ops {
			verify = verify || op == jwk.KeyOpVerify
		}
		if !verify {
			return verifyKey{}, false
		}
	}
	var vk verifyKey
	if a, ok := key.Algorithm(); ok {
		vk.alg = a.String()
	}
	// A set that wrongly carries private keys still only lends their
	// public halves to verification.
	raw, err := jwk.PublicRawKeyOf(key)
	if err != nil {
		return verifyKey{}, false
	}
	switch k := raw.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return verifyKey{}, false
		}
		vk.kind = kindRSA
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			vk.kind = kindP256
		case elliptic.P384():
			vk.kind = kindP384
		case elliptic.P521():
			vk.kind = kindP521
		}
	case ed25519.PublicKey:
		vk.kind = kindEd25519
	case []byte:
		vk.kind = kindOct
	}
	if vk.kind == kindNone {
		return verifyKey{}, false
	}
	vk.raw = raw
	return vk, true
}

// candidates returns the keys that may verify a token with this kid: those
// with that kid, or every key when the token names none. known reports
// whether the kid is in the set at all, which decides whether fetching the
// set again could help.
func (ks *keySet) candidates(kid string) (keys []verifyKey, known bool) {
	if kid == "" {
		return ks.all, false
	}
	keys, known = ks.byKid[kid]
	return keys, known
}
