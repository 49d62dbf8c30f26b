package objurl_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/objstore/objstoretest"
	"github.com/pandastack/pandastack/internal/objstore/objurl"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ url, want, err string }{
		{"file://" + dir, "file://" + dir, ""},
		{dir, "file://" + dir, ""},
		{"s3://bkt/some/prefix?endpoint=http://127.0.0.1:9&region=eu-west-1", "s3://bkt/some/prefix at http://127.0.0.1:9", ""},
		{"s3://KEY:SECRET@bkt", "s3://bkt", ""},
		{"file://relative/path", "", "local path"},
		{"s3:///prefix", "", "no bucket"},
		{"s3://bkt?endpoint=ftp://x", "", "endpoint must be"},
		{"s3://bkt?regoin=x", "", "unknown parameter"},
		{"gs://bkt", "", "scheme must be"},
		{"relative", "", "scheme must be"},
	} {
		s, err := objurl.Open(c.url)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Open(%q) = %v, want error %q", c.url, err, c.err)
			}
		case err != nil:
			t.Errorf("Open(%q): %v", c.url, err)
		case s.String() != c.want:
			t.Errorf("Open(%q) = %s, want %s", c.url, s, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error shows the secret: %v", err)
		}
	}
	if got := objurl.Redact("s3://KEY:SECRET@bkt/p?endpoint=http://x"); strings.Contains(got, "SECRET") {
		t.Fatalf("Redact = %s", got)
	}
}

// Credentials in the URL's userinfo, or in the AWS environment variables,
// reach the server.
func TestCredentials(t *testing.T) {
	g := objstoretest.StartVersityGW(t, "bucket")
	ctx := context.Background()
	s, err := objurl.Open("s3://" + g.AccessKey + ":" + g.SecretKey + "@bucket/p?endpoint=" + g.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("userinfo credentials: %v", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", g.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", g.SecretKey)
	t.Setenv("AWS_ENDPOINT_URL_S3", g.Endpoint)
	s, err = objurl.Open("s3://bucket/p")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("environment credentials: %v", err)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	s, _ = objurl.Open("s3://bucket/p")
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "refused the credentials") || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("wrong secret: %v", err)
	}
}
