// Package auth makes and checks PandaStack API keys.
//
// A key is "pds_" followed by 40 base62 characters drawn from crypto/rand
// (about 238 bits of entropy). Only the hex SHA-256 of a key is stored. A
// fast, unsalted hash is the right tool here: salting and slow hashes (bcrypt,
// argon2) exist to make guessing low-entropy passwords expensive, and nobody
// can enumerate a 238-bit space however fast the hash is. A plain hash also
// lets the server find a key by its hash with one indexed lookup.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// KeyPrefix starts every API key, so leaked keys are easy to recognise and
// scan for.
const KeyPrefix = "pds_"

// E2BKeyPrefix starts an E2B-shaped key ("e2b_" and 40 lowercase hex
// characters, 160 bits from crypto/rand): the shape E2B's SDKs expect in
// E2B_API_KEY (the Python SDK checks it). It authenticates exactly like a
// "pds_" key; only its shape differs.
const E2BKeyPrefix = "e2b_"

// e2bKeyHexLen is the number of hex characters after E2BKeyPrefix.
const e2bKeyHexLen = 40

// keyBodyLen is the number of random base62 characters after KeyPrefix.
const keyBodyLen = 40

// PrefixLen is how many leading characters of a key are kept for display.
const PrefixLen = 12

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewKey makes a new API key. secret is shown to the user once; prefix (its
// first PrefixLen characters) and hash (Hash(secret)) are what is stored.
func NewKey() (secret, prefix, hash string, err error) {
	body, err := randomBase62(keyBodyLen)
	if err != nil {
		return "", "", "", fmt.Errorf("generate API key: %w", err)
	}
	secret = KeyPrefix + body
	return secret, secret[:PrefixLen], Hash(secret), nil
}

// NewE2BKey makes a new key in E2B's shape (E2BKeyPrefix and 40 lowercase
// hex characters); secret, prefix and hash are as for NewKey.
func NewE2BKey() (secret, prefix, hash string, err error) {
	var b [e2bKeyHexLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", "", fmt.Errorf("generate E2B API key: %w", err)
	}
	secret = E2BKeyPrefix + hex.EncodeToString(b[:])
	return secret, secret[:PrefixLen], Hash(secret), nil
}

// IsE2BKey reports whether a key (or its stored prefix) is E2B-shaped.
func IsE2BKey(s string) bool { return strings.HasPrefix(s, E2BKeyPrefix) }

// Hash returns the hex SHA-256 of a key: the form in which keys are stored
// and looked up.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// LooksLikeKey reports whether s has the shape of an API key. It is a cheap
// pre-check; it does not mean the key exists.
func LooksLikeKey(s string) bool {
	if IsE2BKey(s) {
		if len(s) != len(E2BKeyPrefix)+e2bKeyHexLen {
			return false
		}
		for i := len(E2BKeyPrefix); i < len(s); i++ {
			if c := s[i]; !('0' <= c && c <= '9') && !('a' <= c && c <= 'f') {
				return false
			}
		}
		return true
	}
	if !strings.HasPrefix(s, KeyPrefix) || len(s) != len(KeyPrefix)+keyBodyLen {
		return false
	}
	for i := len(KeyPrefix); i < len(s); i++ {
		if strings.IndexByte(base62, s[i]) < 0 {
			return false
		}
	}
	return true
}

// Matches reports, in constant time, whether secret hashes to storedHash.
func Matches(secret, storedHash string) bool {
	return subtle.ConstantTimeCompare([]byte(Hash(secret)), []byte(storedHash)) == 1
}

// randomBase62 returns n characters drawn uniformly from base62 by rejection
// sampling random bytes (bytes >= 248 would bias the result and are skipped).
func randomBase62(n int) (string, error) {
	const limit = 256 - 256%len(base62) // 248
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+8)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if int(b) >= limit {
				continue
			}
			out = append(out, base62[int(b)%len(base62)])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}
