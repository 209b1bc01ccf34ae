// Package s3 keeps chunks in an S3-compatible object store (Amazon S3,
// MinIO, Ceph RGW, versitygw, ...), one object per chunk, through
// minio-go. It implements chunk.Store and nothing more: retries and
// concurrency limits are chunk.Retry and chunk.Limit around it, so this
// code makes each call once (the client's own retries are off) and only
// says which failures are worth another try (chunk.Transient).
//
// Objects are named <prefix>/<first two hex digits>/<hex id>: the fanout
// spreads keys over many prefixes, which Amazon S3 scales request rates
// by, and lets an operator list or copy a slice of the store.
package s3

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"berth/vfs/chunk"
)

// Errors Open returns when the store cannot be used. They name what the
// operator has to fix; compare with errors.Is.
var (
	// ErrNoBucket: the bucket does not exist on the server.
	ErrNoBucket = errors.New("s3: bucket does not exist")
	// ErrCredentials: the server refused the access key or its signature
	// (wrong key, wrong secret, or no right to the bucket).
	ErrCredentials = errors.New("s3: credentials refused")
	// ErrUnreachable: no S3 server answered at the endpoint.
	ErrUnreachable = errors.New("s3: endpoint unreachable")
)

// Options says where the chunks live and how to sign in.
type Options struct {
	// Endpoint is the server's URL, http:// or https://; without a
	// scheme it is https.
	Endpoint string
	// Bucket holds the chunks; it must exist (Open does not create it).
	Bucket string
	// Region is the bucket's region; empty lets the client ask.
	Region string
	// Prefix is put before every object name ("chunks" gives
	// chunks/ab/abcd...); empty puts the fanout at the bucket's top.
	Prefix string
	// PathStyle puts the bucket in the URL's path (servers without
	// wildcard DNS: MinIO, versitygw, Ceph); false lets the client
	// choose (virtual-hosted for Amazon, path style for addresses).
	PathStyle bool
	// AccessKey, SecretKey and SessionToken sign the requests when
	// CredentialsFile is empty.
	AccessKey, SecretKey, SessionToken string
	// CredentialsFile is an AWS shared credentials file whose [default]
	// profile signs the requests.
	CredentialsFile string
	// Transport carries the requests; nil is a clone of
	// http.DefaultTransport with enough idle connections per host for
	// the requests chunk.Limit lets through.
	Transport http.RoundTripper
	// Parallelism is how many requests one upload or one download keeps
	// in flight (chunk.Parallel); 0 means DefaultParallelism.
	Parallelism int
}

// DefaultParallelism is the requests one upload or download keeps in
// flight. Every request waits a round trip of a millisecond or more
// (more on a busy server) whatever its size, so a stream of 1 MiB chunks
// needs several going at once to move hundreds of MB/s; each holds a
// chunk in memory (a download's buffer is sized for the largest chunk,
// 4 MiB). On versitygw over loopback, on a busy 2-core machine where a
// request waited 15 to 35 ms, 1 GiB went down at 211, 150 and 291 MB/s
// with 4, 8 and 16 in flight, and up at 62, 63 and 96 MB/s: the rates
// swing 2x there, so 8 is a middle, at twice the disk store's memory
// per download (docs/operations.md, "Throughput").
const DefaultParallelism = 8

// castagnoli is the CRC32C table, the checksum S3 calls CRC32C.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Store is the S3 chunk store.
type Store struct {
	c        *minio.Core
	bucket   string
	prefix   string // "" or ending in "/"
	parallel int
}

var (
	_ chunk.Store        = (*Store)(nil)
	_ chunk.BufferGetter = (*Store)(nil)
	_ chunk.Parallel     = (*Store)(nil)
)

// Parallelism is Options.Parallelism: the requests one upload or
// download keeps in flight.
func (s *Store) Parallelism() int { return s.parallel }

// Open connects to the bucket and checks that it is there and that the
// credentials are taken, so that a misconfigured store fails at start
// with ErrNoBucket, ErrCredentials or ErrUnreachable rather than at the
// first upload.
func Open(ctx context.Context, o Options) (*Store, error) {
	host, secure, err := endpoint(o.Endpoint)
	if err != nil {
		return nil, err
	}
	if o.Bucket == "" {
		return nil, errors.New("s3: no bucket named")
	}
	var creds *credentials.Credentials
	if o.CredentialsFile != "" {
		creds = credentials.NewFileAWSCredentials(o.CredentialsFile, "default")
		v, err := creds.GetWithContext(nil)
		if err != nil {
			return nil, fmt.Errorf("s3: reading credentials file %s: %w", o.CredentialsFile, err)
		}
		if v.AccessKeyID == "" || v.SecretAccessKey == "" {
			return nil, fmt.Errorf("s3: credentials file %s has no aws_access_key_id and aws_secret_access_key in its [default] profile", o.CredentialsFile)
		}
	} else {
		if o.AccessKey == "" || o.SecretKey == "" {
			return nil, errors.New("s3: no access key and secret key given")
		}
		creds = credentials.NewStaticV4(o.AccessKey, o.SecretKey, o.SessionToken)
	}
	tr := o.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		t.MaxIdleConns = 256
		// Blobs are compressed already (or do not compress): no
		// Accept-Encoding, no gzip in between.
		t.DisableCompression = true
		tr = t
	}
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.NewCore(host, &minio.Options{
		Creds: creds, Secure: secure, Region: o.Region, BucketLookup: lookup,
		Transport: tr,
		// chunk.Retry decides: one attempt per call here.
		MaxRetries: 1,
		// No trailers: Put sends its CRC32C as a header (see Put).
		TrailingHeaders: false,
	})
	if err != nil {
		return nil, fmt.Errorf("s3: endpoint %q: %w", o.Endpoint, err)
	}
	s := &Store{c: c, bucket: o.Bucket, prefix: strings.Trim(o.Prefix, "/"), parallel: o.Parallelism}
	if s.parallel <= 0 {
		s.parallel = DefaultParallelism
	}
	if s.prefix != "" {
		s.prefix += "/"
	}
	if err := s.check(ctx, o.Endpoint); err != nil {
		return nil, err
	}
	return s, nil
}

// endpoint splits an endpoint URL into the host minio-go takes and
// whether it speaks TLS.
func endpoint(e string) (host string, secure bool, err error) {
	if e == "" {
		return "", false, errors.New("s3: no endpoint named")
	}
	if !strings.Contains(e, "://") {
		e = "https://" + e
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || strings.Trim(u.Path, "/") != "" {
		return "", false, fmt.Errorf("s3: endpoint %q is not an http:// or https:// URL of a host (and port)", e)
	}
	return u.Host, u.Scheme == "https", nil
}

// check asks for the bucket, and lists one object under the prefix: the
// two requests the store cannot work without.
func (s *Store) check(ctx context.Context, ep string) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err == nil && !ok {
		err = ErrNoBucket
	}
	if err == nil {
		for obj := range s.c.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, MaxKeys: 1}) {
			err = obj.Err
			break
		}
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r := minio.ToErrorResponse(err)
	switch {
	case errors.Is(err, ErrNoBucket) || r.Code == minio.NoSuchBucket:
		return fmt.Errorf("%w: %s at %s", ErrNoBucket, s.bucket, ep)
	case r.StatusCode == http.StatusForbidden || r.StatusCode == http.StatusUnauthorized ||
		r.Code == "AccessDenied" || r.Code == "InvalidAccessKeyId" || r.Code == "SignatureDoesNotMatch":
		return fmt.Errorf("%w by %s for bucket %s: %s", ErrCredentials, ep, s.bucket, describe(err, r))
	case isNetwork(err):
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, ep, err)
	}
	return fmt.Errorf("s3: checking bucket %s at %s: %w", s.bucket, ep, err)
}

func describe(err error, r minio.ErrorResponse) string {
	if r.Code != "" {
		return r.Code + ": " + r.Message
	}
	return err.Error()
}

// key is the object name of id.
func (s *Store) key(id chunk.ID) string {
	h := id.String()
	return s.prefix + h[:2] + "/" + h
}

// parseKey returns the id of an object name key wrote, and false for any
// other object that shares the prefix.
func (s *Store) parseKey(name string) (chunk.ID, bool) {
	rest, ok := strings.CutPrefix(name, s.prefix)
	if !ok || len(rest) != 3+64 || rest[2] != '/' {
		return chunk.ID{}, false
	}
	id, err := chunk.ParseID(rest[3:])
	if err != nil || rest[:2] != rest[3:5] {
		return chunk.ID{}, false
	}
	return id, true
}

// Put uploads blob in one request. S3 answers a PUT once the object is
// stored (durably, on any server worth the name); an existing id is
// overwritten with the same bytes, which is the no-op the contract asks.
func (s *Store) Put(ctx context.Context, id chunk.ID, blob []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// The CRC32C goes in a header, computed here first (the blob is in
	// memory, and CRC32C runs at memory speed on amd64 and arm64): the
	// server checks it and refuses a body damaged on the way. Sent as a
	// trailer instead, the body would travel aws-chunked, decoded on the
	// server at a cost, and versitygw also computes a software CRC64NVME
	// of every body whose checksum it does not know up front, 10% of its
	// CPU per PUT (docs/operations.md).
	sum := crc32.Checksum(blob, castagnoli)
	_, err := s.c.Client.PutObject(ctx, s.bucket, s.key(id), bytes.NewReader(blob), int64(len(blob)), minio.PutObjectOptions{
		ContentType:      "application/octet-stream",
		DisableMultipart: true,
		// Over http the client would otherwise sign the body: SHA-256
		// of every byte on both sides, the largest cost of an upload.
		// The CRC32C guards the transfer, and every read checks the
		// chunk's BLAKE3 anyway.
		DisableContentSha256: true,
		UserMetadata: map[string]string{
			"X-Amz-Checksum-Crc32c": base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum)),
		},
	})
	return s.fail(ctx, "put", id, err)
}

// Get downloads the blob.
func (s *Store) Get(ctx context.Context, id chunk.ID) ([]byte, error) {
	return s.GetInto(ctx, id, nil)
}

// GetInto downloads the blob into dst[:0], growing it if it is too
// small, in one GET whose answer says the length first.
func (s *Store) GetInto(ctx context.Context, id chunk.ID, dst []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	body, info, _, err := s.c.GetObject(ctx, s.bucket, s.key(id), minio.GetObjectOptions{})
	if err != nil {
		return nil, s.fail(ctx, "get", id, err)
	}
	defer body.Close()
	if info.Size < 0 || info.Size > 64<<20 {
		// No chunk is near that; reading it whole would be the mistake.
		return nil, fmt.Errorf("%w: %s: object of %d bytes", chunk.ErrCorrupt, id, info.Size)
	}
	n := int(info.Size)
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	if _, err := io.ReadFull(body, dst); err != nil {
		return nil, s.fail(ctx, "get", id, err)
	}
	return dst, nil
}

// Has asks for the object's metadata.
func (s *Store) Has(ctx context.Context, id chunk.ID) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	_, err := s.c.StatObject(ctx, s.bucket, s.key(id), minio.StatObjectOptions{})
	if err == nil {
		return true, nil
	}
	if err := s.fail(ctx, "stat", id, err); !errors.Is(err, chunk.ErrNotFound) {
		return false, err
	}
	return false, nil
}

// Delete removes the object; S3 answers a missing one with success too.
func (s *Store) Delete(ctx context.Context, id chunk.ID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.c.RemoveObject(ctx, s.bucket, s.key(id), minio.RemoveObjectOptions{})
	if err := s.fail(ctx, "delete", id, err); err != nil && !errors.Is(err, chunk.ErrNotFound) {
		return err
	}
	return nil
}

// Walk lists the prefix page by page; objects under it that this store
// did not name are skipped.
func (s *Store) Walk(ctx context.Context, fn func(chunk.ID) error) error {
	return s.list(ctx, func(id chunk.ID, _ int64) error { return fn(id) })
}

// Size lists the prefix and adds up the objects' sizes. It costs one
// request per thousand chunks: an operator's figure, not a hot path.
func (s *Store) Size(ctx context.Context) (int64, error) {
	var n int64
	err := s.list(ctx, func(_ chunk.ID, size int64) error { n += size; return nil })
	return n, err
}

func (s *Store) list(ctx context.Context, fn func(chunk.ID, int64) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range s.c.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true}) {
		if obj.Err != nil {
			return s.fail(ctx, "list", chunk.ID{}, obj.Err)
		}
		id, ok := s.parseKey(obj.Key)
		if !ok {
			continue
		}
		if err := fn(id, obj.Size); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// fail turns a client error into the store's: ErrNotFound for a missing
// object, the context's error once it has ended, and a transient error
// (chunk.Transient) for the failures another attempt may get past.
func (s *Store) fail(ctx context.Context, op string, id chunk.ID, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("s3 %s %s: %w", op, id, ctx.Err())
	}
	r := minio.ToErrorResponse(err)
	if r.Code == minio.NoSuchKey || (r.StatusCode == http.StatusNotFound && r.Code != minio.NoSuchBucket) {
		return fmt.Errorf("%w: %s", chunk.ErrNotFound, id)
	}
	err = fmt.Errorf("s3 %s %s: %w", op, id, err)
	if transient(r, err) {
		return transientError{err}
	}
	return err
}

// transient reports the failures S3 clients are told to retry: throttling
// (503 SlowDown, 429), server errors (5xx), request timeouts, and
// connections that failed or broke mid-answer.
func transient(r minio.ErrorResponse, err error) bool {
	switch r.Code {
	case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "RequestTimeTooSkewed", "OperationAborted":
		return true
	}
	if r.StatusCode >= 500 || r.StatusCode == http.StatusTooManyRequests || r.StatusCode == http.StatusRequestTimeout {
		return true
	}
	return isNetwork(err) || errors.Is(err, io.ErrUnexpectedEOF)
}

func isNetwork(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// transientError marks an error chunk.Retry may try again.
type transientError struct{ err error }

func (e transientError) Error() string   { return e.err.Error() }
func (e transientError) Unwrap() error   { return e.err }
func (e transientError) Transient() bool { return true }

// markerKey is the object name of the store's marker (chunk.Marked): the
// prefix's, beside its fan-out names, which parseKey does not take.
func (s *Store) markerKey() string { return s.prefix + "berth-marker" }

// Marker downloads the store's marker; chunk.ErrNotFound when it has
// none.
func (s *Store) Marker(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	body, _, _, err := s.c.GetObject(ctx, s.bucket, s.markerKey(), minio.GetObjectOptions{})
	if err != nil {
		return nil, s.failMarker(ctx, "get", err)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, 4<<10))
	if err != nil {
		return nil, s.failMarker(ctx, "get", err)
	}
	return b, nil
}

// SetMarker uploads the store's marker.
func (s *Store) SetMarker(ctx context.Context, m []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := s.c.Client.PutObject(ctx, s.bucket, s.markerKey(), bytes.NewReader(m), int64(len(m)), minio.PutObjectOptions{})
	return s.failMarker(ctx, "put", err)
}

// failMarker is fail for the marker's object.
func (s *Store) failMarker(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("s3 %s %s: %w", op, s.markerKey(), ctx.Err())
	}
	r := minio.ToErrorResponse(err)
	if r.Code == minio.NoSuchKey || (r.StatusCode == http.StatusNotFound && r.Code != minio.NoSuchBucket) {
		return fmt.Errorf("%w: %s", chunk.ErrNotFound, s.markerKey())
	}
	return fmt.Errorf("s3 %s %s: %w", op, s.markerKey(), err)
}

var _ chunk.Marked = (*Store)(nil)
