// Package s3 is the object store on Amazon S3 or any S3-compatible service
// (versitygw, Ceph, R2, …), on the AWS SDK for Go v2.
//
// Puts stream: a body that fits one part (PartSize) is one PutObject;
// anything longer is a multipart upload sent one part at a time from one
// reused buffer, aborted if the source or the context fails, so a failed
// Put leaves nothing. Credentials are given explicitly (package objurl
// reads them from the URL or the standard AWS environment variables); the
// SDK's default chain is not used, so nothing ever asks an instance
// metadata service.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pandastack/pandastack/internal/objstore"
)

// Config names a bucket and how to reach it.
type Config struct {
	Bucket string
	// Prefix is prepended (with a "/") to every key: several stores can
	// share a bucket. Empty: keys are the bucket's keys.
	Prefix string
	// Endpoint is the service's URL (http://127.0.0.1:7070); empty for
	// AWS itself. With an endpoint, requests use path-style addressing.
	Endpoint string
	Region   string // default us-east-1
	// AccessKeyID and SecretAccessKey (and SessionToken) sign requests;
	// empty: anonymous requests.
	AccessKeyID, SecretAccessKey, SessionToken string
	// PartSize is the size of each part of a multipart upload, and the
	// most a Put holds in memory (default 8 MiB, at least 5 MiB).
	PartSize int
	// ListPageSize is how many keys a List asks for per request (default:
	// the service's, 1000 on S3). Tests lower it to exercise paging.
	ListPageSize int32
	// HTTPClient, if set, sends the requests.
	HTTPClient *http.Client
}

// Store is an object store in an S3 bucket. Create it with New.
type Store struct {
	cfg     Config
	client  *s3.Client
	presign *s3.PresignClient
}

var _ objstore.Store = (*Store)(nil)

// DefaultPartSize is a multipart upload's part size unless Config says.
const DefaultPartSize = 8 << 20

const minPartSize = 5 << 20 // S3's minimum for every part but the last

// New returns a store for cfg. It sends no request: Check does.
func New(cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3 object store: no bucket")
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.Prefix != "" {
		if err := objstore.CheckKey(cfg.Prefix); err != nil {
			return nil, fmt.Errorf("s3 object store prefix: %w", err)
		}
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PartSize < minPartSize {
		cfg.PartSize = minPartSize
	}
	opts := s3.Options{
		Region: cfg.Region,
		// S3-compatible services do not all take the SDK's default
		// trailing CRC checksums; SigV4 signs each body's SHA-256 anyway.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.AccessKeyID != "" {
		opts.Credentials = credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)
	} else {
		opts.Credentials = aws.AnonymousCredentials{}
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
		opts.UsePathStyle = true
	}
	if cfg.HTTPClient != nil {
		opts.HTTPClient = cfg.HTTPClient
	}
	c := s3.New(opts)
	return &Store{cfg: cfg, client: c, presign: s3.NewPresignClient(c)}, nil
}

// String names the bucket, prefix and endpoint (never the credentials).
func (s *Store) String() string {
	u := "s3://" + s.cfg.Bucket
	if s.cfg.Prefix != "" {
		u += "/" + s.cfg.Prefix
	}
	if s.cfg.Endpoint != "" {
		u += " at " + s.cfg.Endpoint
	}
	return u
}

func (s *Store) key(k string) string {
	if s.cfg.Prefix == "" {
		return k
	}
	return s.cfg.Prefix + "/" + k
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if err := objstore.CheckKey(key); err != nil {
		return err
	}
	buf := make([]byte, s.cfg.PartSize)
	n, err := io.ReadFull(ctxReader{ctx, r}, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		_, err = s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.key(key)),
			Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n))})
		return s.wrap("put", key, err)
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return s.multipart(ctx, key, r, buf)
}

// multipart uploads buf (full) and the rest of r, a part at a time.
func (s *Store) multipart(ctx context.Context, key string, r io.Reader, buf []byte) (err error) {
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.key(key))})
	if err != nil {
		return s.wrap("put", key, err)
	}
	defer func() {
		if err != nil {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_, _ = s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: up.Key, UploadId: up.UploadId})
		}
	}()
	var parts []types.CompletedPart
	n := len(buf)
	for num := int32(1); ; num++ {
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.cfg.Bucket, Key: up.Key, UploadId: up.UploadId,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n))})
		if err != nil {
			return s.wrap("put", key, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		if n < len(buf) {
			break // that was the last, short part
		}
		// S3 allows 10,000 parts: double the part size every thousand.
		if num%1000 == 0 {
			buf = make([]byte, 2*len(buf))
		}
		n, err = io.ReadFull(ctxReader{ctx, r}, buf)
		if err == io.EOF {
			break
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			return fmt.Errorf("put %s: %w", key, err)
		}
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: up.Key,
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	return s.wrap("put", key, err)
}

// Get implements objstore.Store. Reads fail once ctx is done.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := objstore.CheckKey(key); err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.key(key))})
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	return out.Body, nil
}

// Stat implements objstore.Store.
func (s *Store) Stat(ctx context.Context, key string) (objstore.Info, error) {
	if err := objstore.CheckKey(key); err != nil {
		return objstore.Info{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.key(key))})
	if err != nil {
		return objstore.Info{}, s.wrap("stat", key, err)
	}
	return objstore.Info{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// List implements objstore.Store, a page of ListPageSize keys at a time.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	full := s.key(prefix)
	if s.cfg.Prefix != "" && prefix == "" {
		full = s.cfg.Prefix + "/"
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, Prefix: aws.String(full)}
	if s.cfg.ListPageSize > 0 {
		in.MaxKeys = aws.Int32(s.cfg.ListPageSize)
	}
	var out []objstore.Info
	p := s3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", prefix, err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if s.cfg.Prefix != "" {
				k = strings.TrimPrefix(k, s.cfg.Prefix+"/")
			}
			out = append(out, objstore.Info{Key: k, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objstore.CheckKey(key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.key(key))})
	if err = s.wrap("delete", key, err); objstore.IsNotFound(err) {
		return nil
	}
	return err
}

// PresignGet implements objstore.Store: a SigV4 query-signed URL.
func (s *Store) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if err := objstore.CheckKey(key); err != nil {
		return "", err
	}
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.key(key))},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", s.wrap("presign", key, err)
	}
	return req.URL, nil
}

// Check implements objstore.Store: the bucket answers, and the
// credentials may list, write and delete under the prefix.
func (s *Store) Check(ctx context.Context) error {
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.cfg.Bucket}); err != nil {
		return s.explain(err)
	}
	probe := fmt.Sprintf(".pandastack-check-%d", time.Now().UnixNano())
	if err := s.Put(ctx, probe, strings.NewReader("ok")); err != nil {
		return s.explain(err)
	}
	if err := s.Delete(ctx, probe); err != nil {
		return s.explain(err)
	}
	return nil
}

// explain turns a failed Check into a message an operator can act on.
func (s *Store) explain(err error) error {
	var re *smithyhttp.ResponseError
	var ae smithy.APIError
	switch {
	case errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket":
		return fmt.Errorf("object store %s: the bucket %q does not exist: %w", s, s.cfg.Bucket, err)
	case errors.As(err, &re) && (re.HTTPStatusCode() == 403 || re.HTTPStatusCode() == 401):
		return fmt.Errorf("object store %s refused the credentials (HTTP %d; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or user:secret@ in the URL): %w", s, re.HTTPStatusCode(), err)
	case errors.As(err, &re) && re.HTTPStatusCode() == 404:
		return fmt.Errorf("object store %s: the bucket %q does not exist: %w", s, s.cfg.Bucket, err)
	case errors.As(err, &re) && re.HTTPStatusCode() != 0:
		return fmt.Errorf("object store %s answered HTTP %d: %w", s, re.HTTPStatusCode(), err)
	}
	return fmt.Errorf("object store %s does not answer: %w", s, err)
}

// wrap says what failed, turning a missing object into ErrNotFound.
func (s *Store) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%s %s: %w", op, key, objstore.ErrNotFound)
		}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == 404 && !(errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket") {
		return fmt.Errorf("%s %s: %w", op, key, objstore.ErrNotFound)
	}
	return fmt.Errorf("%s %s in %s: %w", op, key, s, err)
}

// ctxReader ends a Put's reads when its context does.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
