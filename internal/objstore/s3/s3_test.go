package s3_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pandastack/pandastack/internal/objstore"
	"github.com/pandastack/pandastack/internal/objstore/objstoretest"
	"github.com/pandastack/pandastack/internal/objstore/s3"
)

// The suite against a real S3 server on loopback; each test gets a prefix
// of its own in one bucket, and lists page every 50 keys.
func TestConformance(t *testing.T) {
	g := objstoretest.StartVersityGW(t, "bucket")
	var n atomic.Int32
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		s, err := s3.New(s3.Config{Bucket: "bucket", Prefix: fmt.Sprintf("test%d/sub", n.Add(1)), Endpoint: g.Endpoint,
			Region: g.Region, AccessKeyID: g.AccessKey, SecretAccessKey: g.SecretKey, ListPageSize: 50})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Check is what the server runs at start: each way it can fail says so.
func TestCheckExplainsFailures(t *testing.T) {
	g := objstoretest.StartVersityGW(t, "bucket")
	ctx := context.Background()
	cases := []struct {
		name string
		cfg  s3.Config
		want string
	}{
		{"works", s3.Config{Bucket: "bucket", AccessKeyID: g.AccessKey, SecretAccessKey: g.SecretKey}, ""},
		{"wrong secret", s3.Config{Bucket: "bucket", AccessKeyID: g.AccessKey, SecretAccessKey: "wrong"}, "refused the credentials"},
		{"no credentials", s3.Config{Bucket: "bucket"}, "refused the credentials"},
		{"no such bucket", s3.Config{Bucket: "nope", AccessKeyID: g.AccessKey, SecretAccessKey: g.SecretKey}, `bucket "nope" does not exist`},
		{"nothing listens", s3.Config{Bucket: "bucket", Endpoint: "http://127.0.0.1:1", AccessKeyID: "key-id", SecretAccessKey: "secret-never-shown"}, "does not answer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.cfg.Endpoint == "" {
				c.cfg.Endpoint = g.Endpoint
			}
			s, err := s3.New(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Check(ctx)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Check = %v, want %q", err, c.want)
			}
			if err != nil && c.cfg.SecretAccessKey != "" && strings.Contains(err.Error(), c.cfg.SecretAccessKey) {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}
