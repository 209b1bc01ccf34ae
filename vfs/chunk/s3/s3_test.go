package s3_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth/vfs/chunk"
	"berth/vfs/chunk/chunktest"
	"berth/vfs/chunk/s3"
	"berth/vfs/chunk/s3/s3test"
)

// options returns the Options of a store in a fresh bucket of srv.
func options(t testing.TB, srv *s3test.Server) s3.Options {
	return s3.Options{
		Endpoint: srv.Endpoint, Bucket: srv.Bucket(t), Region: srv.Region,
		Prefix: "chunks", PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
	}
}

func open(t testing.TB, o s3.Options) *s3.Store {
	t.Helper()
	s, err := s3.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	chunktest.Run(t, func(t *testing.T) chunk.Store { return open(t, options(t, srv)) })
	// The wrappers daemon puts around it pass too.
	t.Run("RetryLimit", func(t *testing.T) {
		chunktest.Run(t, func(t *testing.T) chunk.Store {
			return chunk.NewRetry(chunk.NewLimit(open(t, options(t, srv)), 4), chunk.RetryOptions{})
		})
	})
}

// TestLayout checks the object names and that Walk and Size skip
// objects of the bucket that are not chunks of this prefix.
func TestLayout(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	o := options(t, srv)
	s := open(t, o)
	b := []byte("hello")
	id := chunk.Sum(b)
	if err := s.Put(ctx, id, b); err != nil {
		t.Fatal(err)
	}
	h := id.String()
	// posix backend: object names are paths under the bucket's directory.
	if _, err := os.Stat(filepath.Join(srv.Dir, o.Bucket, "chunks", h[:2], h)); err != nil {
		t.Fatalf("object not at chunks/%s/%s: %v", h[:2], h, err)
	}
	// A neighbour under another prefix, sharing the bucket, and a stray
	// object under ours.
	other := o
	other.Prefix = "other"
	os2 := open(t, other)
	b2 := []byte("elsewhere")
	if err := os2.Put(ctx, chunk.Sum(b2), b2); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srv.Dir, o.Bucket, "chunks", "README"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var seen []chunk.ID
	if err := s.Walk(ctx, func(id chunk.ID) error { seen = append(seen, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != id {
		t.Fatalf("Walk saw %v, want only %s", seen, id)
	}
	if n, err := s.Size(ctx); err != nil || n != int64(len(b)) {
		t.Fatalf("Size = %d, %v; want %d", n, err, len(b))
	}
}

// TestOpenErrors is the start-up check: each misconfiguration gives its
// own error, naming what to fix.
func TestOpenErrors(t *testing.T) {
	srv := s3test.Start(t)
	good := options(t, srv)
	// An address nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	credFile := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(credFile, []byte("[default]\naws_access_key_id = "+srv.AccessKey+"\naws_secret_access_key = "+srv.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyFile, []byte("[other]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		edit    func(*s3.Options)
		want    error  // nil: opens
		message string // a part of the message
	}{
		{"Good", func(*s3.Options) {}, nil, ""},
		{"RegionAskedOfServer", func(o *s3.Options) { o.Region = "" }, nil, ""},
		{"NoPrefix", func(o *s3.Options) { o.Prefix = "" }, nil, ""},
		{"EndpointWithSlash", func(o *s3.Options) { o.Endpoint += "/" }, nil, ""},
		{"CredentialsFile", func(o *s3.Options) { o.AccessKey, o.SecretKey, o.CredentialsFile = "", "", credFile }, nil, ""},
		{"MissingBucket", func(o *s3.Options) { o.Bucket = "no-such-bucket" }, s3.ErrNoBucket, "no-such-bucket"},
		{"WrongSecret", func(o *s3.Options) { o.SecretKey = "wrong" + o.SecretKey }, s3.ErrCredentials, o(good).Bucket},
		{"UnknownKey", func(o *s3.Options) { o.AccessKey = "nobody" }, s3.ErrCredentials, ""},
		{"Unreachable", func(o *s3.Options) { o.Endpoint = closed }, s3.ErrUnreachable, closed},
		{"BadEndpoint", func(o *s3.Options) { o.Endpoint = "ftp://example.com" }, nil, "not an http:// or https:// URL"},
		{"NoEndpoint", func(o *s3.Options) { o.Endpoint = "" }, nil, "no endpoint"},
		{"NoBucket", func(o *s3.Options) { o.Bucket = "" }, nil, "no bucket"},
		{"NoKeys", func(o *s3.Options) { o.AccessKey, o.SecretKey = "", "" }, nil, "no access key"},
		{"CredentialsFileMissing", func(o *s3.Options) { o.CredentialsFile = filepath.Join(t.TempDir(), "none") }, nil, "reading credentials file"},
		{"CredentialsFileWithoutDefault", func(o *s3.Options) { o.CredentialsFile = emptyFile }, nil, "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := s3.Open(ctx, o)
			if tc.want == nil && tc.message == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Open succeeded")
			}
			t.Logf("%v", err)
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("Open = %q, want it to name %q", err, tc.message)
			}
		})
	}
}

func o(x s3.Options) s3.Options { return x }

// TestTransient: a server that went away is a failure chunk.Retry tries
// again; a missing object is not.
func TestTransient(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	s := open(t, options(t, srv))
	id := chunk.Sum([]byte("missing"))
	if _, err := s.Get(ctx, id); !errors.Is(err, chunk.ErrNotFound) || chunk.IsTransient(err) {
		t.Fatalf("Get(missing) = %v (transient %v), want ErrNotFound, not transient", err, chunk.IsTransient(err))
	}
	srv.Stop()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Put", func() error { return s.Put(ctx, id, []byte("x")) }},
		{"Get", func() error { _, err := s.Get(ctx, id); return err }},
		{"Has", func() error { _, err := s.Has(ctx, id); return err }},
		{"Delete", func() error { return s.Delete(ctx, id) }},
		{"Walk", func() error { return s.Walk(ctx, func(chunk.ID) error { return nil }) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); err == nil || !chunk.IsTransient(err) {
				t.Fatalf("%s with the server gone = %v, want a transient error", tc.name, err)
			}
		})
	}
}
