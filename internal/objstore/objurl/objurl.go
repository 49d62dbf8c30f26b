// Package objurl opens the object store a URL names — storage chosen by a
// URL's scheme, as tailscale's ipn/store chooses by a path prefix:
//
//	file:///var/lib/pandastack/objects
//	s3://BUCKET[/PREFIX][?endpoint=http://127.0.0.1:7070&region=us-east-1]
//
// An s3 URL's credentials come from its userinfo (s3://KEY:SECRET@bucket/…)
// or else the standard AWS environment variables (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); its region from ?region=,
// AWS_REGION or AWS_DEFAULT_REGION; its endpoint from ?endpoint=,
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (none: AWS). Redact a URL before
// logging it.
package objurl

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/pandastack/pandastack/internal/objstore"
	"github.com/pandastack/pandastack/internal/objstore/file"
	"github.com/pandastack/pandastack/internal/objstore/s3"
)

// Open returns the store rawURL names. It sends no request; call the
// store's Check to know it answers.
func Open(rawURL string) (objstore.Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("object store URL %s: %w", Redact(rawURL), err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("object store URL %s: a file URL names a local path (file:///abs/path)", Redact(rawURL))
		}
		if !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("object store URL %s: the path must be absolute", Redact(rawURL))
		}
		return file.Open(u.Path)
	case "s3":
		return openS3(u)
	case "":
		if filepath.IsAbs(rawURL) {
			return file.Open(rawURL)
		}
	}
	return nil, fmt.Errorf("object store URL %s: the scheme must be file:// or s3://", Redact(rawURL))
}

func openS3(u *url.URL) (objstore.Store, error) {
	q := u.Query()
	for k := range q {
		if k != "endpoint" && k != "region" {
			return nil, fmt.Errorf("object store URL %s: unknown parameter %q (endpoint, region)", Redact(u.String()), k)
		}
	}
	cfg := s3.Config{
		Bucket:       u.Host,
		Prefix:       strings.Trim(u.Path, "/"),
		Endpoint:     first(q.Get("endpoint"), os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL")),
		Region:       first(q.Get("region"), os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION")),
		AccessKeyID:  os.Getenv("AWS_ACCESS_KEY_ID"),
		SessionToken: os.Getenv("AWS_SESSION_TOKEN"),
	}
	cfg.SecretAccessKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
	if u.User != nil {
		cfg.AccessKeyID = u.User.Username()
		cfg.SecretAccessKey, _ = u.User.Password()
		cfg.SessionToken = ""
	}
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("object store URL %s: no bucket (s3://BUCKET/PREFIX)", Redact(u.String()))
	}
	if cfg.Endpoint != "" {
		e, err := url.Parse(cfg.Endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, fmt.Errorf("object store URL %s: endpoint must be an http(s) URL", Redact(u.String()))
		}
	}
	return s3.New(cfg)
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// Remote reports whether rawURL names a store off this host (s3), which
// is worth exporting snapshots to.
func Remote(rawURL string) bool { return strings.HasPrefix(rawURL, "s3://") }

// Redact returns rawURL without the secret of its userinfo, for logs and
// messages.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		if i := strings.LastIndex(rawURL, "@"); i >= 0 {
			return "s3://REDACTED" + rawURL[i:]
		}
		return rawURL
	}
	return u.Redacted()
}
