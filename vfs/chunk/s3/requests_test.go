package s3_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"berth/vfs/chunk"
	"berth/vfs/chunk/s3"
	"berth/vfs/chunk/s3/s3test"
)

// roundTripper is a function that carries requests.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRequests checks what each request costs on the wire: connections
// kept between requests, and a PUT's CRC32C, which the server checks.
func TestRequests(t *testing.T) {
	srv := s3test.Start(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *s3test.Server)
	}{
		{"ConnectionsReused", connectionsReused},
		{"DamagedBodyRefused", damagedBodyRefused},
		{"Parallelism", parallelism},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, srv) })
	}
}

// connectionsReused: a run of requests, one at a time, goes over one
// connection. A new one per request (versitygw without --keep-alive)
// costs a handshake on both sides: about 40% of the CPU of a 1 MiB
// upload, client and server (docs/operations.md).
func connectionsReused(t *testing.T, srv *s3test.Server) {
	var dials atomic.Int64
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	o := options(t, srv)
	o.Transport = tr
	s := open(t, o)
	ctx := context.Background()
	before := dials.Load()
	for i := range 10 {
		b := bytes.Repeat([]byte{byte(i)}, 300<<10)
		id := chunk.Sum(b)
		if ok, err := s.Has(ctx, id); err != nil || ok {
			t.Fatalf("Has before Put = %v, %v", ok, err)
		}
		if err := s.Put(ctx, id, b); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, id); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("Get = %d bytes, %v", len(got), err)
		}
	}
	if n := dials.Load() - before; n > 1 {
		t.Errorf("30 requests one after another opened %d connections, want at most 1", n)
	}
}

// damagedBodyRefused: a PUT body changed on the way does not match the
// CRC32C sent ahead of it, and the server stores nothing.
func damagedBodyRefused(t *testing.T, srv *s3test.Server) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	o := options(t, srv)
	o.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPut && r.Body != nil {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			b[len(b)/2] ^= 1
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		return tr.RoundTrip(r)
	})
	s := open(t, o)
	ctx := context.Background()
	b := bytes.Repeat([]byte("damaged"), 50000)
	id := chunk.Sum(b)
	if err := s.Put(ctx, id, b); err == nil {
		t.Fatal("Put of a damaged body succeeded")
	} else {
		t.Logf("%v", err)
	}
	plain := o
	plain.Transport = nil
	if ok, err := open(t, plain).Has(ctx, id); err != nil || ok {
		t.Fatalf("Has after the refused Put = %v, %v; want false", ok, err)
	}
}

// parallelism: the store asks for Options.Parallelism requests in flight
// per stream, DefaultParallelism by default, and is found through the
// wrappers daemon puts around it.
func parallelism(t *testing.T, srv *s3test.Server) {
	o := options(t, srv)
	if got := open(t, o).Parallelism(); got != s3.DefaultParallelism {
		t.Errorf("default Parallelism = %d, want %d", got, s3.DefaultParallelism)
	}
	o.Parallelism = 3
	s := open(t, o)
	wrapped := chunk.NewRetry(chunk.NewLimit(s, 32), chunk.RetryOptions{})
	if got := chunk.ParallelismOf(wrapped); got != 3 {
		t.Errorf("ParallelismOf(retry(limit(store))) = %d, want 3", got)
	}
}
