// Command davload is the load generator of bench/webdav.sh: many small
// PUTs from a few keep-alive clients, and timed PROPFINDs. It is a Go
// program rather than xargs + curl because a curl process per request
// measures process start and TLS handshakes, not the server.
//
//	davload put -url https://127.0.0.1:8443/dav/dir/ -n 2000 -c 8 -size 4096
//	davload propfind -url https://127.0.0.1:8443/dav/dir/ -runs 9
//	davload cycle -url https://127.0.0.1:8443/dav/dir/ -n 1000 -c 4 -size 4096
//	davload files -dir /srv/dav/list -n 10000 -size 4096
//	davload fsync -dir /tmp/x -n 2000 -c 8 -size 4096
//	davload serve -listen 127.0.0.1:9443 -cert c.pem -key k.pem -user u -pass p [-dir d]
//
// files writes the same kind of files straight to a directory, for the
// peers whose folder is a plain directory. fsync and serve measure this
// machine's own limits for two of the figures: fsync writes n files of size
// bytes from c writers, each synced before the next (what a durable small
// PUT costs the disk at the least), and serve is a bare Go HTTPS server that
// answers every GET with size bytes from memory after the same Basic check,
// the ceiling of any Go server for wrk's small GETs and, with /big.bin,
// for one large GET; it reads and discards a PUT's body, the ceiling for
// one large PUT. With -dir, serve also stores what is sent under /durable/
// in that directory, durably and with nothing else (durableHandler): the
// least a server that never acknowledges a write before it is on disk
// does, for the large PUT, the small PUTs and the cycles; and under
// /logged/ it appends each PUT, MKCOL, MOVE and DELETE to one log with
// group commit (loggedHandler), the most such a server reaches here. cycle is what a sync client does to a tree: each of c
// clients repeats MKCOL of a folder, PUT of one file of size bytes into
// it, MOVE of the folder and DELETE of the moved folder, n cycles in all.
//
// Both accept -user and -pass for HTTP Basic and trust any certificate
// (loopback benchmarks against self-signed servers). Results go to stdout
// as key=value words that the script reads.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"berth/bench/internal/durable"
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
		return errors.New("usage: davload put|propfind|files|fsync|serve [flags]")
	}
	fl := flag.NewFlagSet(args[0], flag.ContinueOnError)
	base := fl.String("url", "", "folder URL, ending in /")
	user := fl.String("user", "", "Basic auth user (none when empty)")
	pass := fl.String("pass", "", "Basic auth password")
	n := fl.Int("n", 2000, "put, fsync: number of files; cycle: number of cycles")
	conc := fl.Int("c", 8, "put, fsync, cycle: concurrent clients")
	size := fl.Int("size", 4096, "put, fsync, serve: bytes per file")
	runs := fl.Int("runs", 9, "propfind: timed runs of each request (the median is reported)")
	timeout := fl.Duration("timeout", 10*time.Minute, "give up after this long")
	dir := fl.String("dir", "", "files, fsync: directory to fill; serve: directory of /durable/")
	listen := fl.String("listen", "127.0.0.1:0", "serve: address")
	cert := fl.String("cert", "", "serve: certificate file")
	key := fl.String("key", "", "serve: key file")
	big := fl.Int64("big", 1<<30, "serve: bytes of /big.bin")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "files":
		return files(*dir, *n, *size)
	case "fsync":
		return fsyncFiles(*dir, *n, *conc, *size)
	case "serve":
		return serve(*listen, *cert, *key, *user, *pass, *size, *big, *dir)
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
		if *runs < 1 {
			return errors.New("-runs must be at least 1")
		}
		return c.propfind(ctx, *runs)
	case "cycle":
		return c.cycle(ctx, *n, *conc, *size)
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}

// put creates the folder (MKCOL; an existing one is fine), then PUTs n
// distinct random files of size bytes from conc clients (eachFile). Every
// file is different so that no server's deduplication or compression
// flatters the figure.
func (c *client) put(ctx context.Context, n, conc, size int) error {
	if st, b, err := c.do(ctx, "MKCOL", c.base, nil, 0); err != nil || (st != 201 && st != 405) {
		return fmt.Errorf("MKCOL %s: %d %v %s", c.base, st, err, b)
	}
	return eachFile(ctx, n, conc, size, func(i int, body []byte) error {
		url := fmt.Sprintf("%sf%05d.bin", c.base, i)
		st, b, err := c.do(ctx, "PUT", url, bytes.NewReader(body), int64(size))
		if err != nil || st/100 != 2 {
			return fmt.Errorf("PUT %s: %d %v %s", url, st, err, b)
		}
		return nil
	})
}

// cycle creates the folder, then runs n cycles of MKCOL, PUT, MOVE and
// DELETE from conc clients (eachFile), each on its own folder, and reports
// the cycles per second. Every step must succeed with the status the
// RFC gives a new resource, so a server that skipped one would fail here.
func (c *client) cycle(ctx context.Context, n, conc, size int) error {
	if st, b, err := c.do(ctx, "MKCOL", c.base, nil, 0); err != nil || (st != 201 && st != 405) {
		return fmt.Errorf("MKCOL %s: %d %v %s", c.base, st, err, b)
	}
	return eachFile(ctx, n, conc, size, func(i int, body []byte) error {
		dir := fmt.Sprintf("%sc%05d/", c.base, i)
		moved := fmt.Sprintf("%sm%05d/", c.base, i)
		steps := []struct {
			method, url string
			body        []byte
			hdr         []string
		}{
			{"MKCOL", dir, nil, nil},
			{"PUT", dir + "f.bin", body, nil},
			{"MOVE", dir, nil, []string{"Destination", moved, "Overwrite", "F"}},
			{"DELETE", moved, nil, nil},
		}
		for _, st := range steps {
			var r io.Reader
			if st.body != nil {
				r = bytes.NewReader(st.body)
			}
			code, b, err := c.do(ctx, st.method, st.url, r, int64(len(st.body)), st.hdr...)
			if err != nil || code/100 != 2 {
				return fmt.Errorf("%s %s: %d %v %.200s", st.method, st.url, code, err, b)
			}
		}
		return nil
	})
}

// eachFile calls write for n distinct random bodies of size bytes from
// conc goroutines, each taking the next file when its last is done, and
// reports the wall time and the rate; the first error stops it.
func eachFile(ctx context.Context, n, conc, size int, write func(i int, body []byte) error) error {
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
				if err := write(i, bodies[i*size:(i+1)*size]); err != nil {
					errs <- err
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
		return fmt.Errorf("%w after %d files", ctx.Err(), next.Load())
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

// fsyncFiles writes n distinct files of size bytes into dir from conc
// writers, each file written, fdatasynced and closed before the writer's
// next, and reports the rate as put does. The directory is not synced: this
// is a floor under what a durable small write costs, not a full one.
func fsyncFiles(dir string, n, conc, size int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return eachFile(context.Background(), n, conc, size, func(i int, body []byte) error {
		return durable.WriteFile(fmt.Sprintf("%s/f%05d.bin", dir, i), bytes.NewReader(body), nil)
	})
}

// serve answers every request with size bytes (200, application/octet-
// stream, an ETag) once its Basic credentials match, and /big.bin with big
// bytes, until it is killed. It prints its address first, for the script.
func serve(addr, cert, key, user, pass string, size int, big int64, dir string) error {
	var stored, logged http.HandlerFunc
	if dir != "" {
		stored = durableHandler(dir)
		l, err := durable.OpenLog(filepath.Join(dir, ".group-log"))
		if err != nil {
			return err
		}
		defer l.Close()
		logged = loggedHandler(l)
	}
	body := make([]byte, size)
	rand.Read(body)
	// /big.bin repeats one random MiB, so the server's memory stays small.
	block := make([]byte, 1<<20)
	rand.Read(block)
	want := []byte(user + ":" + pass)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u+":"+p), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="davload"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if stored != nil && strings.HasPrefix(r.URL.Path, "/durable/") {
			stored(w, r)
			return
		}
		if logged != nil && strings.HasPrefix(r.URL.Path, "/logged/") {
			logged(w, r)
			return
		}
		if r.Method == http.MethodPut {
			// What a server that stored nothing would do: read it all.
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			w.WriteHeader(http.StatusCreated)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("ETag", `"davload"`)
		if r.URL.Path == "/big.bin" {
			w.Header().Set("Content-Length", strconv.FormatInt(big, 10))
			for left := big; left > 0; {
				n, err := w.Write(block[:min(left, int64(len(block)))])
				if err != nil {
					return
				}
				left -= int64(n)
			}
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("listen=%s\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		// HTTP/1.1, as berth serves the script's clients.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	return srv.ServeTLS(ln, cert, key)
}

// propfindBody names the properties that Windows, macOS, davfs2 and rclone
// ask for, rather than allprop.
const propfindBody = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop>
<D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/><D:creationdate/>
</D:prop></D:propfind>`

// allpropBody asks for every property, as Windows' Explorer first does.
const allpropBody = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`

// propfind times PROPFIND Depth 1 of the folder, with the named
// properties and with allprop, runs times each on one warm keep-alive
// connection (one untimed run of each first opens it, fills the page
// cache and any credential cache), and reports the median of each, the
// median of their ratio run by run, and the number of entries. The two
// alternate, each run a pair whose first also alternates, so that a
// change of load on a shared machine falls on both sides of the ratio
// rather than on whichever came second. The answer is read as it comes
// and counted, not gathered: a 7 MB allprop gathered cost the client
// growing copies that the named answer's 3 MB did not.
func (c *client) propfind(ctx context.Context, runs int) error {
	bodies := [2]string{propfindBody, allpropBody}
	var times [2][]time.Duration
	var ratios []float64
	var entries [2]int
	for i := range runs + 1 {
		var el [2]time.Duration
		for j := range 2 {
			k := (i + j) % 2
			start := time.Now()
			n, err := c.countHrefs(ctx, bodies[k])
			el[k] = time.Since(start)
			if err != nil {
				return err
			}
			entries[k] = n
		}
		if i > 0 {
			times[0] = append(times[0], el[0])
			times[1] = append(times[1], el[1])
			ratios = append(ratios, float64(el[1])/float64(el[0]))
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for k := range times {
		slices.Sort(times[k])
	}
	slices.Sort(ratios)
	med := runs / 2
	fmt.Printf("named_ms=%.1f named_min_ms=%.1f named_max_ms=%.1f allprop_ms=%.1f allprop_min_ms=%.1f allprop_max_ms=%.1f ratio=%.2f entries=%d allprop_entries=%d\n",
		ms(times[0][med]), ms(times[0][0]), ms(times[0][runs-1]),
		ms(times[1][med]), ms(times[1][0]), ms(times[1][runs-1]),
		ratios[med], entries[0], entries[1])
	return nil
}

// durableHandler serves PUT, MKCOL, MOVE and DELETE under /durable/ from
// dir, each made durable before its answer and nothing more: no locks,
// no properties, no checks of the tree, no atomic replacement of a file.
// A PUT is written through the page cache, fdatasynced and its folder
// fsynced (a new name is a change of the folder); MKCOL, MOVE and DELETE
// fsync the folders they change. It is the floor under what any durable
// server pays for those requests on this machine, where nginx and Apache,
// which sync nothing, are the ceiling.
func durableHandler(dir string) http.HandlerFunc {
	local := func(p string) (string, bool) {
		rel, ok := strings.CutPrefix(path.Clean(p), "/durable/")
		return filepath.Join(dir, filepath.FromSlash(rel)), ok && rel != ""
	}
	bufs := sync.Pool{New: func() any { return make([]byte, 1<<20) }}
	return func(w http.ResponseWriter, r *http.Request) {
		name, ok := local(r.URL.Path)
		if !ok {
			http.Error(w, "bad path", http.StatusBadRequest)
			return
		}
		parent := filepath.Dir(name)
		code, err := http.StatusCreated, error(nil)
		switch r.Method {
		case http.MethodPut:
			buf := bufs.Get().([]byte)
			err = durable.Put(name, r.Body, buf)
			bufs.Put(buf)
		case "MKCOL":
			if err = os.Mkdir(name, 0o755); errors.Is(err, fs.ErrExist) {
				code, err = http.StatusMethodNotAllowed, nil
			} else if err == nil {
				err = durable.SyncDir(parent)
			}
		case "MOVE":
			u, perr := url.Parse(r.Header.Get("Destination"))
			to, ok := "", perr == nil
			if ok {
				to, ok = local(u.Path)
			}
			if !ok {
				http.Error(w, "bad Destination", http.StatusBadRequest)
				return
			}
			if err = os.Rename(name, to); err == nil {
				if err = durable.SyncDir(parent); err == nil && filepath.Dir(to) != parent {
					err = durable.SyncDir(filepath.Dir(to))
				}
			}
		case http.MethodDelete:
			code = http.StatusNoContent
			if err = os.RemoveAll(name); err == nil {
				err = durable.SyncDir(parent)
			}
		default:
			http.Error(w, "not here", http.StatusMethodNotAllowed)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(code)
	}
}

// loggedHandler serves PUT, MKCOL, MOVE and DELETE under /logged/ by
// appending each to one log with group commit (durable.Log): durable
// before its answer, with one fdatasync for all the requests that arrive
// while the last one runs, and nothing else: no files, no tree, no checks.
// It is the most a durable server with group commit reaches on this
// machine for the small PUTs and the cycles.
func loggedHandler(l *durable.Log) http.HandlerFunc {
	bufs := sync.Pool{New: func() any { return make([]byte, 64<<10) }}
	return func(w http.ResponseWriter, r *http.Request) {
		key, body, code := r.URL.Path, io.Reader(nil), http.StatusCreated
		switch r.Method {
		case http.MethodPut:
			body = r.Body
		case "MKCOL":
		case "MOVE":
			key += "\x00" + r.Header.Get("Destination")
		case http.MethodDelete:
			code = http.StatusNoContent
		default:
			http.Error(w, "not here", http.StatusMethodNotAllowed)
			return
		}
		buf := bufs.Get().([]byte)
		err := l.Append(r.Method, key, body, buf)
		bufs.Put(buf)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(code)
	}
}

// countHrefs sends one PROPFIND Depth 1 of the folder with body and
// counts the entries of its answer as it reads it: one href element per
// response, whatever the namespace prefix.
func (c *client) countHrefs(ctx context.Context, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "PROPFIND", c.base, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.ContentLength = int64(len(body))
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	req.Header.Set("Depth", "1")
	req.Header.Set("Content-Type", "application/xml")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusMultiStatus {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return 0, fmt.Errorf("PROPFIND %s: %d %s", c.base, resp.StatusCode, b)
	}
	const mark = "href>"
	buf := make([]byte, 64<<10)
	carry, hrefs := 0, 0 // carry: bytes kept from the last read, a mark's start
	for {
		n, err := resp.Body.Read(buf[carry:])
		chunk := buf[:carry+n]
		hrefs += bytes.Count(chunk, []byte(mark))
		carry = min(len(mark)-1, len(chunk))
		if i := bytes.LastIndex(chunk[len(chunk)-carry:], []byte(mark[:1])); i >= 0 {
			carry -= i
		} else {
			carry = 0
		}
		copy(buf, chunk[len(chunk)-carry:])
		if err == io.EOF {
			return hrefs / 2, nil
		}
		if err != nil {
			return 0, fmt.Errorf("PROPFIND %s: %w", c.base, err)
		}
	}
}
