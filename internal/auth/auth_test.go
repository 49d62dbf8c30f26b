package auth

import (
	"strings"
	"testing"
)

func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		secret, prefix, hash, err := NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(secret, "pds_") || len(secret) != 44 {
			t.Fatalf("secret %q: want pds_ + 40 chars", secret)
		}
		if !LooksLikeKey(secret) {
			t.Fatalf("LooksLikeKey(%q) = false", secret)
		}
		if prefix != secret[:12] {
			t.Fatalf("prefix %q is not the first 12 chars of %q", prefix, secret)
		}
		if hash != Hash(secret) || len(hash) != 64 {
			t.Fatalf("hash %q is not Hash(secret)", hash)
		}
		if seen[secret] {
			t.Fatalf("duplicate key %q", secret)
		}
		seen[secret] = true
	}
}

func TestHashKnownValue(t *testing.T) {
	// sha256("abc")
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := Hash("abc"); got != want {
		t.Fatalf("Hash(abc) = %s, want %s", got, want)
	}
}

func TestMatches(t *testing.T) {
	secret, _, hash, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		secret string
		hash   string
		want   bool
	}{
		{"right key", secret, hash, true},
		{"other key", secret + "x", hash, false},
		{"empty hash", secret, "", false},
		{"empty key", "", hash, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Matches(tt.secret, tt.hash); got != tt.want {
				t.Fatalf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLooksLikeKey(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"valid", "pds_" + strings.Repeat("aZ09", 10), true},
		{"no prefix", strings.Repeat("a", 44), false},
		{"too short", "pds_abc", false},
		{"bad char", "pds_" + strings.Repeat("a", 39) + "-", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LooksLikeKey(tt.in); got != tt.want {
				t.Fatalf("LooksLikeKey(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
