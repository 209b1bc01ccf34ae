// Command davload is the load generator of bench/webdav.sh: many small
// PUTs from a few keep-alive clients, and timed PROPFINDs. It is a Go
// program rather than xargs + curl because a curl process per request
// measures process start and TLS handshakes, not the server.
//
//	davload put -url https://127.0.0.1:8443/dav/dir/ -n 2000 -c 8 -size 4096
//	davload propfind -url https://127.0.0.1:8443/dav/dir/ -runs 5
//	davload files -dir /srv/dav/list -n 10000 -size 4096
//
// files writes the same kind of files straight to a directory, for the
// peers whose folder is a plain directory.
//
// Both accept -user and -pass for HTTP Basic and trust any certificate
// (loopback benchmarks against self-signed servers). Results go to stdout
// as key=value words that the script reads.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "davload:", err)
		os.Exit(1)
	}
}

// client is what both subcommands share: the base URL, the credentials
// and an HTTP/1.1 client with one idle connection per worker, as wrk and
// curl use against the peers.
type client struct {
	base, user, pass string
	http             *http.Client
}

func (c *client) do(ctx context.Context, method, url string, body io.Reader, size int64, hdr ...string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, nil, err
	}
	req.ContentLength = size
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: davload put|propfind [flags]")
	}
	fl := flag.NewFlagSet(args[0], flag.ContinueOnError)
	base := fl.String("url", "", "folder URL, ending in /")
	user := fl.String("user", "", "Basic auth user (none when empty)")
	pass := fl.String("pass", "", "Basic auth password")
	n := fl.Int("n", 2000, "put: number of files")
	conc := fl.Int("c", 8, "put: concurrent clients")
	size := fl.Int("size", 4096, "put: bytes per file")
	runs := fl.Int("runs", 5, "propfind: timed runs (the median is reported)")
	timeout := fl.Duration("timeout", 10*time.Minute, "give up after this long")
	dir := fl.String("dir", "", "files: directory to fill")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	if args[0] == "files" {
		return files(*dir, *n, *size)
	}
	if !strings.HasSuffix(*base, "/") {
		return errors.New("-url must be a folder URL ending in /")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c := &client{base: *base, user: *user, pass: *pass, http: &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		MaxIdleConnsPerHost: max(*conc, 2),
		// HTTP/1.1 for all three servers: Apache and nginx are not
		// configured for HTTP/2 here.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}}}
	switch args[0] {
	case "put":
		return c.put(ctx, *n, *conc, *size)
	case "propfind":
		return c.propfind(ctx, *runs)
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}

// put creates the folder (MKCOL; an existing one is fine), then PUTs n
// distinct random files of size bytes from conc clients, and reports the
// wall time and the rate. Every file is different so that no server's
// deduplication or compression flatters the figure.
func (c *client) put(ctx context.Context, n, conc, size int) error {
	if st, b, err := c.do(ctx, "MKCOL", c.base, nil, 0); err != nil || (st != 201 && st != 405) {
		return fmt.Errorf("MKCOL %s: %d %v %s", c.base, st, err, b)
	}
	bodies := make([]byte, n*size)
	rand.Read(bodies)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				body := bodies[i*size : (i+1)*size]
				url := fmt.Sprintf("%sf%05d.bin", c.base, i)
				st, b, err := c.do(ctx, "PUT", url, bytes.NewReader(body), int64(size))
				if err != nil || st/100 != 2 {
					errs <- fmt.Errorf("PUT %s: %d %v %s", url, st, err, b)
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("put: %w after %d files", ctx.Err(), next.Load())
	}
	fmt.Printf("files=%d seconds=%.3f per_second=%.1f\n", n, el.Seconds(), float64(n)/el.Seconds())
	return nil
}

// files writes n random files of size bytes into dir, named as put names them.
func files(dir string, n, size int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data := make([]byte, size)
	for i := range n {
		rand.Read(data)
		if err := os.WriteFile(fmt.Sprintf("%s/f%05d.bin", dir, i), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// propfindBody names the properties that Windows, macOS, davfs2 and rclone
// ask for, rather than allprop.
const propfindBody = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop>
<D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/><D:creationdate/>
</D:prop></D:propfind>`

// propfind times PROPFIND Depth 1 of the folder on a warm keep-alive
// connection (one untimed run first opens it, fills the page cache and any
// credential cache), and reports the median and the number of entries.
func (c *client) propfind(ctx context.Context, runs int) error {
	var times []time.Duration
	entries := 0
	for i := range runs + 1 {
		start := time.Now()
		st, b, err := c.do(ctx, "PROPFIND", c.base, strings.NewReader(propfindBody), int64(len(propfindBody)),
			"Depth", "1", "Content-Type", "application/xml")
		el := time.Since(start)
		if err != nil || st != 207 {
			return fmt.Errorf("PROPFIND %s: %d %v %.200s", c.base, st, err, b)
		}
		// One href element per response, whatever the namespace prefix.
		entries = bytes.Count(b, []byte("href>")) / 2
		if i > 0 {
			times = append(times, el)
		}
	}
	slices.Sort(times)
	med := times[len(times)/2]
	fmt.Printf("median_ms=%.1f min_ms=%.1f max_ms=%.1f entries=%d\n",
		float64(med.Microseconds())/1000, float64(times[0].Microseconds())/1000,
		float64(times[len(times)-1].Microseconds())/1000, entries)
	return nil
}
