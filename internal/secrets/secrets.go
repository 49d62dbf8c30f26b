// Package secrets encrypts what the platform keeps for tenants and must be
// able to read back — database passwords, app environment variables,
// function secrets — before it reaches the store, so a copied database file
// or backup holds no usable credential.
//
// A Box seals with AES-256-GCM under one key. The key lives in its own file
// (DATA/secret.key, mode 0600, created at first start), not in the store:
// the store and its backups alone decrypt nothing. Each sealed value carries
// a fresh random nonce and is bound to an associated string (the record it
// belongs to, such as "db:ID:password"), so a ciphertext copied into another
// record's field fails to open rather than leaking there.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// prefix marks a sealed value and its format version.
const prefix = "v1:"

// KeySize is the length of a Box's key in bytes.
const KeySize = 32

// ErrOpen means a sealed value did not decrypt: a different key, another
// record's value, or bytes that were altered.
var ErrOpen = errors.New("secrets: value does not open with this key")

// Box seals and opens values under one key. It is safe for concurrent use.
type Box struct{ aead cipher.AEAD }

// New returns a Box for a KeySize-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secrets: key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return &Box{aead: aead}, nil
}

// LoadOrCreate reads the key file at path, creating it with a new random
// key (mode 0600, parent directories included) when it does not exist.
func LoadOrCreate(path string) (*Box, error) {
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("create secret key: %w", err)
		}
		if err := writeKey(path, key); err != nil {
			return nil, err
		}
		return New(key)
	}
	if err != nil {
		return nil, fmt.Errorf("read secret key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secret key %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	return New(key)
}

// writeKey creates path exclusively, so two servers starting on one data
// dir cannot each write a different key.
func writeKey(path string, key []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create secret key: %w", err)
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("create secret key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("create secret key: %w", err)
	}
	return f.Close()
}

// Seal encrypts plaintext bound to aad (the record and field it belongs
// to) and returns printable text to store.
func (b *Box) Seal(plaintext, aad string) (string, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	out := b.aead.Seal(nonce, nonce, []byte(plaintext), []byte(aad))
	return prefix + base64.RawStdEncoding.EncodeToString(out), nil
}

// Open decrypts a value Seal returned for the same aad.
func (b *Box) Open(sealed, aad string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return "", ErrOpen
	}
	raw, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil || len(raw) < b.aead.NonceSize() {
		return "", ErrOpen
	}
	n := b.aead.NonceSize()
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], []byte(aad))
	if err != nil {
		return "", ErrOpen
	}
	return string(plain), nil
}
