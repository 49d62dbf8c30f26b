package databases

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
)

// newRecord records a new database of teamID named name, creating, with
// role user, database dbname and a new password: sealed in the record,
// returned in the clear for the caller's one answer that shows it. The
// record comes first so that a taken name fails before any machine starts.
func (s *Service) newRecord(ctx context.Context, teamID, name, user, dbname string) (pandastack.Database, string, error) {
	password := newPassword()
	d := pandastack.Database{ID: pandastack.NewID("db-"), TeamID: teamID, Name: name, State: pandastack.DatabaseCreating,
		User: user, DBName: dbname, CreatedAt: time.Now().UTC()}
	sealed, err := s.cfg.Secrets.Seal(password, passwordAAD(d.ID))
	if err != nil {
		return d, "", fmt.Errorf("seal database password: %w", err)
	}
	d.PasswordSealed = sealed
	if err := s.cfg.Store.CreateDatabase(ctx, d); err != nil {
		return d, "", err
	}
	return d, password, nil
}

// newPassword is 32 random bytes, URL-safe base64: nothing in it needs
// escaping in a connection URI.
func newPassword() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// scramIterations is PostgreSQL's default scram_iterations.
const scramIterations = 4096

// newVerifier is scramVerifier of password with a fresh random salt.
func newVerifier(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("scram salt: %w", err)
	}
	return scramVerifier(password, salt)
}

// scramVerifier is what PostgreSQL stores for a SCRAM-SHA-256 password
// (RFC 5802/7677; PostgreSQL's "SCRAM-SHA-256$iter:salt$StoredKey:ServerKey").
// Given to CREATE ROLE ... PASSWORD, the plain password never enters the
// machine. password must be ASCII without control characters (SASLprep is
// then the identity), as newPassword's are.
func scramVerifier(password string, salt []byte) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, scramIterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("derive scram key: %w", err)
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	server := mac(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, b64(salt), b64(stored[:]), b64(server)), nil
}
