package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// remoteItem (backup_send.go) is also a file or folder of a mapped root
// as its folder's listing shows it (spec 2.2, 2.3).

func (it remoteItem) dir() bool { return it.Type == "folder" }

// remoteListing is one folder's children as last read, with the hash
// that lets the next read be a 304.
type remoteListing struct {
	hash     string
	children []remoteItem
}

// remoteTree reads a root through the REST file API. Listings are cached
// by folder id with their hash: a poll asks every folder with the hash it
// holds and most answer 304 Not Modified with no body, so an unchanged
// tree costs one small request per folder and no decoding.
type remoteTree struct {
	c      *Client
	rootID uint64
	cache  map[uint64]*remoteListing // folder id (0: the root's top) -> listing
}

// remoteModified is how the API writes date-times (UTC, whole seconds).
const remoteModified = "2006-01-02T15:04:05"

func (rt *remoteTree) folderURL(id uint64) string {
	if id == 0 {
		return fmt.Sprintf("/api/2/files/%d", rt.rootID)
	}
	return fmt.Sprintf("/api/2/files/%d/folder/%d", rt.rootID, id)
}

// list returns folder id's children, from the cache when the server says
// they did not change; changed reports a fresh listing.
func (rt *remoteTree) list(ctx context.Context, id uint64) (children []remoteItem, changed bool, err error) {
	q := url.Values{"include_children": {"true"}}
	old := rt.cache[id]
	if old != nil {
		q.Set("hash", old.hash)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rt.c.Base()+rt.folderURL(id)+"?"+q.Encode(), nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := rt.c.Do(req)
	if err != nil {
		return nil, false, err
	}
	if err := CheckResponse(resp); err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified && old != nil {
		return old.children, false, nil
	}
	var body struct {
		Hash     string       `json:"hash"`
		Children []remoteItem `json:"children"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, false, fmt.Errorf("agent: listing of folder %d: %w", id, err)
	}
	rt.cache[id] = &remoteListing{hash: body.Hash, children: body.Children}
	return body.Children, true, nil
}

// scan walks the whole root and returns every item by relative path
// (slash-separated, no leading slash), and whether any listing changed
// since the last scan.
func (rt *remoteTree) scan(ctx context.Context) (map[string]remoteItem, bool, error) {
	if rt.cache == nil {
		rt.cache = map[uint64]*remoteListing{}
	}
	out := map[string]remoteItem{}
	seen := map[uint64]bool{}
	anyChanged := false
	type todo struct {
		id  uint64
		rel string
	}
	queue := []todo{{0, ""}}
	queued := map[uint64]bool{0: true}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		seen[f.id] = true
		children, changed, err := rt.list(ctx, f.id)
		if err != nil {
			return nil, false, err
		}
		anyChanged = anyChanged || changed
		for _, ch := range children {
			// The listing is the server's word, and the server (or
			// whoever sits between) is not trusted with this disk: a
			// name such as ".." would make every path below it one
			// outside the mapped folder, and a folder listed twice
			// (inside itself) would make the walk endless.
			name := path.Base(ch.Path)
			if !localName(name) || (ch.dir() && queued[ch.ID]) {
				continue
			}
			rel := path.Join(f.rel, name)
			out[rel] = ch
			if ch.dir() {
				queued[ch.ID] = true
				queue = append(queue, todo{ch.ID, rel})
			}
		}
	}
	for id := range rt.cache {
		if !seen[id] {
			delete(rt.cache, id)
			anyChanged = true
		}
	}
	return out, anyChanged, nil
}

// localName reports whether name, from the server, may name a file or
// folder on this disk: one path element, as the server's own naming
// rule has it (vfs.ValidateName: not empty, ".", "..", nor longer than
// 255 bytes, no slash, backslash or control character). The agent
// checks it again rather than join whatever a listing says onto a local
// path.
func localName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > 255 {
		return false
	}
	return !strings.ContainsFunc(name, func(r rune) bool {
		return r == '/' || r == '\\' || r < 0x20 || r == 0x7f
	})
}

// forget drops folder id's cached listing, so the next scan reads it
// whole (after the agent changed it).
func (rt *remoteTree) forget(id uint64) { delete(rt.cache, id) }

// createFolder creates name in folder parent (0: the top).
func (rt *remoteTree) createFolder(ctx context.Context, parent uint64, name string) (remoteItem, error) {
	var it remoteItem
	err := rt.c.PostForm(ctx, rt.folderURL(parent)+"/create_folder", url.Values{"name": {name}}, &it)
	rt.forget(parent)
	return it, err
}

// delete moves the item to the root's trash.
func (rt *remoteTree) delete(ctx context.Context, it remoteItem, parent uint64) error {
	p := fmt.Sprintf("/api/2/files/%d/%d/delete", rt.rootID, it.ID)
	if it.dir() {
		p = fmt.Sprintf("/api/2/files/%d/folder/%d/delete", rt.rootID, it.ID)
	}
	err := rt.c.PostForm(ctx, p, nil, nil)
	rt.forget(parent)
	return err
}

// upload streams the local file at local into folder parent as name (a
// new revision when the name exists). progress is told of bytes sent.
func (rt *remoteTree) upload(ctx context.Context, parent uint64, name, local string, progress func(int64)) (remoteItem, error) {
	var it remoteItem
	// The body is a pipe fed from the file, never a buffer; GetBody
	// builds it again from the start when a 401 makes Do resend it.
	body := func() (io.ReadCloser, string, error) {
		f, err := openNoFollow(local)
		if err != nil {
			return nil, "", err
		}
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			defer f.Close()
			err := func() error {
				if err := mw.WriteField("name", name); err != nil {
					return err
				}
				part, err := mw.CreateFormFile("file", name)
				if err != nil {
					return err
				}
				if _, err := io.Copy(part, &countingReader{r: f, fn: progress}); err != nil {
					return err
				}
				return mw.Close()
			}()
			pw.CloseWithError(err)
		}()
		return pr, mw.FormDataContentType(), nil
	}
	rc, ctype, err := body()
	if err != nil {
		return it, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rt.c.Base()+rt.folderURL(parent)+"/upload", rc)
	if err != nil {
		rc.Close()
		return it, err
	}
	req.Header.Set("Content-Type", ctype)
	req.GetBody = func() (io.ReadCloser, error) {
		b, _, err := body()
		return b, err
	}
	err = rt.c.doJSON(req, &it)
	rt.forget(parent)
	return it, err
}

// download streams item it into a temporary file in dir and returns its
// name; the caller renames it into place or removes it.
func (rt *remoteTree) download(ctx context.Context, it remoteItem, dir string, progress func(int64)) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/2/files/%d/%d/download", rt.c.Base(), rt.rootID, it.ID), nil)
	if err != nil {
		return "", err
	}
	resp, err := rt.c.Do(req)
	if err != nil {
		return "", err
	}
	if err := CheckResponse(resp); err != nil {
		return "", err
	}
	defer resp.Body.Close()
	// createTemp: the mode of a file made here (0666 less the umask),
	// not os.CreateTemp's 0600.
	d, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	name, f, err := createTemp(d, ".", tempPrefix)
	d.Close()
	if err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, name)
	_, err = io.Copy(f, &countingReader{r: resp.Body, fn: progress})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && it.Modified != "" {
		if t, perr := time.Parse(remoteModified, it.Modified); perr == nil {
			err = os.Chtimes(tmp, t, t)
		}
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// open streams item it's contents (to compare them with a local file).
func (rt *remoteTree) open(ctx context.Context, it remoteItem) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/2/files/%d/%d/download", rt.c.Base(), rt.rootID, it.ID), nil)
	if err != nil {
		return nil, err
	}
	resp, err := rt.c.Do(req)
	if err != nil {
		return nil, err
	}
	if err := CheckResponse(resp); err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// countingReader tells fn of every read's byte count.
type countingReader struct {
	r  io.Reader
	fn func(int64)
}

func (p *countingReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 && p.fn != nil {
		p.fn(int64(n))
	}
	return n, err
}

// move moves (and renames) item it into folder to (0: the top) as name.
func (rt *remoteTree) move(ctx context.Context, it remoteItem, from, to uint64, name string) (remoteItem, error) {
	p := fmt.Sprintf("/api/2/files/%d/%d/move", rt.rootID, it.ID)
	if it.dir() {
		p = fmt.Sprintf("/api/2/files/%d/folder/%d/move", rt.rootID, it.ID)
	}
	var out remoteItem
	err := rt.c.PostForm(ctx, p, url.Values{"folder_id": {fmt.Sprint(to)}, "name": {name}}, &out)
	rt.forget(from)
	rt.forget(to)
	return out, err
}
