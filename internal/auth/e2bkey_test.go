package auth

import (
	"regexp"
	"strings"
	"testing"
)

// E2B's SDKs (Python by default) reject keys not matching ^e2b_[0-9a-f]+$.
var e2bShape = regexp.MustCompile(`^e2b_[0-9a-f]{40}$`)

func TestNewE2BKey(t *testing.T) {
	secret, prefix, hash, err := NewE2BKey()
	if err != nil {
		t.Fatal(err)
	}
	if !e2bShape.MatchString(secret) {
		t.Fatalf("secret %q: want e2b_ + 40 lowercase hex", secret)
	}
	if !LooksLikeKey(secret) || !IsE2BKey(secret) {
		t.Fatalf("LooksLikeKey/IsE2BKey(%q) = false", secret)
	}
	if prefix != secret[:PrefixLen] || hash != Hash(secret) {
		t.Fatalf("prefix %q / hash %q do not belong to %q", prefix, hash, secret)
	}
	other, _, _, _ := NewE2BKey()
	if other == secret {
		t.Fatal("two E2B keys are equal")
	}
}

func TestLooksLikeE2BKey(t *testing.T) {
	for _, tt := range []struct {
		key  string
		want bool
	}{
		{"e2b_" + strings.Repeat("a", 40), true},
		{"e2b_" + strings.Repeat("a", 39), false},
		{"e2b_" + strings.Repeat("A", 40), false},
		{"e2b_" + strings.Repeat("g", 40), false},
		{"e2b_", false},
	} {
		if got := LooksLikeKey(tt.key); got != tt.want {
			t.Errorf("LooksLikeKey(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}
