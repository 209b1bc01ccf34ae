package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"path"
	"strconv"
	"time"

	"berth/vfs/chunk"
)

// fileJob is one file a run sends: new, or changed since old.
type fileJob struct {
	path string // in the root
	abs  string // on this machine
	old  *indexEntry
}

// localError is a failure reading the machine's own file: that file is
// skipped (excl_files), the run goes on.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// remoteItem is a child of a folder listing of the server.
type remoteItem struct {
	ID       uint64 `json:"id"`
	Rev      uint64 `json:"revision_id"`
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Modified string `json:"modified"`
	Type     string `json:"type"`
}

// apiTime is the API's date-time layout (spec 7: YYYY-MM-DDTHH:MM:SS,
// UTC).
const apiTime = "2006-01-02T15:04:05"

// sendFile sends fj's file, as a delta against the revision the index
// knows when there is one; a refused delta (the server's file changed)
// is sent whole. A file that cannot be read, or that the server refuses
// (a name it does not take, a policy), is skipped and counted.
func (r *backupRun) sendFile(ctx context.Context, fj fileJob) error {
	err := r.trySend(ctx, fj, true)
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusConflict || ae.Status == http.StatusUnauthorized) {
		err = r.trySend(ctx, fj, ae.Status != http.StatusConflict)
	}
	var le *localError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &le), errors.As(err, &ae) && ae.Status/100 == 4 && ae.Status != http.StatusUnauthorized:
		r.excluded(fj.path, err)
		return nil
	}
	return err
}

// trySend sends fj's file once.
func (r *backupRun) trySend(ctx context.Context, fj fileJob, useBase bool) error {
	f, err := openNoFollow(fj.abs)
	if err != nil {
		return &localError{err}
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return &localError{err}
	}
	entry := indexEntry{Path: fj.path, Size: info.Size(), MtimeNs: info.ModTime().UnixNano(), Ino: inodeOf(info)}
	src := &progressReader{r: f, m: r.m, tr: r.tr}
	if r.adopt && fj.old == nil {
		if it, ok, err := r.remote(ctx, fj.path); err != nil {
			return err
		} else if ok && it.Type == "file" && it.Size == info.Size() && it.Modified == info.ModTime().UTC().Format(apiTime) {
			// Stored by the run that did not end, its answer lost:
			// taken as it is, not sent again.
			chunks, _, err := encodeDelta(io.Discard, src, nil)
			if err != nil {
				return &localError{err}
			}
			entry.ID, entry.Rev, entry.Chunks = it.ID, it.Rev, chunks
			return r.ix.put(entry)
		}
	}
	if o := fj.old; useBase && o != nil && o.Rev != 0 && o.Size == info.Size() && floorSec(o.MtimeNs) == floorSec(entry.MtimeNs) {
		// The same size and the same time to the second the API keeps
		// (a file restored over itself, a copy that kept its time):
		// when the contents are the same too, the server's revision is
		// this file already, and only the index learns its new state.
		chunks, _, err := encodeDelta(io.Discard, src, nil)
		if err != nil {
			return &localError{err}
		}
		if sameChunks(chunks, o.Chunks) {
			entry.ID, entry.Rev, entry.Chunks = o.ID, o.Rev, chunks
			return r.ix.put(entry)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return &localError{err}
		}
	}
	var old map[string]span
	var base uint64
	if useBase && fj.old != nil && fj.old.Rev != 0 && len(fj.old.Chunks) > 0 {
		base = fj.old.Rev
		old = make(map[string]span, len(fj.old.Chunks))
		var off int64
		for _, c := range fj.old.Chunks {
			if _, ok := old[string(c.Sum)]; !ok {
				old[string(c.Sum)] = span{off, c.Len}
			}
			off += c.Len
		}
	}
	var chunks []chunkInfo
	var literal int64
	var out remoteItem
	err = r.write(ctx, writeReq{path: fj.path, modified: info.ModTime(), base: base, body: func(w io.Writer) error {
		var err error
		chunks, literal, err = encodeDelta(w, src, old)
		return err
	}}, &out)
	if err != nil {
		return err
	}
	r.sent.Add(1)
	r.literal.Add(literal)
	r.mu.Lock()
	r.rep.ReadBytes += src.n
	r.mu.Unlock()
	entry.ID, entry.Rev, entry.Chunks = out.ID, out.Rev, chunks
	return r.ix.put(entry)
}

// progressReader counts what a run read of a file into its transfer.
type progressReader struct {
	r  io.Reader
	m  *backupManager
	tr *Transfer
	n  int64
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err != nil && err != io.EOF {
		err = &localError{err}
	}
	p.n += int64(n)
	if p.tr != nil && n > 0 {
		p.m.mu.Lock()
		p.tr.Bytes += int64(n)
		p.m.mu.Unlock()
	}
	return n, err
}

// span is a byte range of a stored revision.
type span struct{ off, len int64 }

// encodeDelta reads src, cuts it into chunks as the server does, and
// writes the delta body (docs/api.md "Agent writes") to w: a chunk the
// base revision has (old, by hash) as a copy of its range, any other as
// literal bytes. Adjacent copies are joined. It returns src's chunks and
// how many literal bytes it wrote. At most one chunk of src is held.
func encodeDelta(w io.Writer, src io.Reader, old map[string]span) (chunks []chunkInfo, literal int64, err error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	buf := make([]byte, 0, chunk.MaxChunkSize+256<<10)
	var pend span
	var tmp [2 * binary.MaxVarintLen64]byte
	flush := func() {
		if pend.len > 0 {
			bw.WriteByte('C')
			n := binary.PutUvarint(tmp[:], uint64(pend.off))
			n += binary.PutUvarint(tmp[n:], uint64(pend.len))
			bw.Write(tmp[:n])
			pend = span{}
		}
	}
	eof := false
	for {
		for !eof && len(buf) < chunk.MaxChunkSize {
			n, err := src.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return nil, 0, err
			}
		}
		if len(buf) == 0 {
			break
		}
		n := chunk.Cut(buf)
		c := buf[:n]
		sum := sha256.Sum256(c)
		chunks = append(chunks, chunkInfo{Len: int64(n), Sum: append([]byte(nil), sum[:16]...)})
		if s, ok := old[string(sum[:16])]; ok && s.len == int64(n) {
			if pend.len > 0 && pend.off+pend.len == s.off {
				pend.len += s.len
			} else {
				flush()
				pend = s
			}
		} else {
			flush()
			bw.WriteByte('D')
			bw.Write(tmp[:binary.PutUvarint(tmp[:], uint64(n))])
			if _, err := bw.Write(c); err != nil {
				return nil, 0, err
			}
			literal += int64(n)
		}
		buf = buf[:copy(buf, buf[n:])]
	}
	flush()
	bw.WriteByte('E')
	return chunks, literal, bw.Flush()
}

// writeReq is one agent write (POST /api/2/agent/files/<root>/write).
type writeReq struct {
	path     string
	folder   bool
	modified time.Time
	base     uint64
	body     func(w io.Writer) error // the delta, for a file
}

// write sends wr, streaming its body, and decodes the answer into out.
func (r *backupRun) write(ctx context.Context, wr writeReq, out any) error {
	c := r.m.a.client
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan error, 1)
	go func() {
		err := func() error {
			fields := [][2]string{{"path", wr.path}}
			if wr.folder {
				fields = append(fields, [2]string{"type", "folder"})
			} else {
				fields = append(fields, [2]string{"type", "file"}, [2]string{"modified", wr.modified.UTC().Format(time.RFC3339Nano)})
				if wr.base != 0 {
					fields = append(fields, [2]string{"base_revision", strconv.FormatUint(wr.base, 10)})
				}
			}
			for _, f := range fields {
				if err := mw.WriteField(f[0], f[1]); err != nil {
					return err
				}
			}
			if !wr.folder {
				h := textproto.MIMEHeader{}
				h.Set("Content-Disposition", `form-data; name="delta"`)
				h.Set("Content-Type", "application/octet-stream")
				part, err := mw.CreatePart(h)
				if err != nil {
					return err
				}
				if err := wr.body(part); err != nil {
					return err
				}
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
		done <- err
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/2/agent/files/%d/write", c.base, r.j.root), pr)
	if err != nil {
		pr.Close()
		<-done
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.Do(req)
	if err == nil {
		if err = CheckResponse(resp); err == nil {
			err = json.NewDecoder(resp.Body).Decode(out)
			resp.Body.Close()
		}
	}
	// An answer that came before the whole body was taken (a refusal)
	// leaves the writer blocked: release it.
	pr.CloseWithError(io.ErrClosedPipe)
	berr := <-done
	var le *localError
	if errors.As(berr, &le) {
		return le // the file could not be read: whatever the server said
	}
	return err
}

// remote returns the server's item at p, listing its folder once per
// run. ok is false when there is none (or its folder is not known).
func (r *backupRun) remote(ctx context.Context, p string) (remoteItem, bool, error) {
	dir := parentOf(p)
	r.mu.Lock()
	items, listed := r.listed[dir]
	r.mu.Unlock()
	if !listed {
		var folder uint64
		if dir != "/" {
			e := r.ix.get(dir)
			if e == nil || !e.Dir {
				return remoteItem{}, false, nil
			}
			folder = e.ID
		}
		list, err := listFolder(ctx, r.m.a.client, r.j.root, folder)
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			list, err = nil, nil
		}
		if err != nil {
			return remoteItem{}, false, err
		}
		items = make(map[string]remoteItem, len(list))
		for _, it := range list {
			items[path.Base(it.Path)] = it
		}
		r.mu.Lock()
		if r.listed == nil {
			r.listed = make(map[string]map[string]remoteItem)
		}
		r.listed[dir] = items
		r.mu.Unlock()
	}
	it, ok := items[path.Base(p)]
	return it, ok, nil
}

// listFolder returns the children of folder (0: the root's top folder)
// of root.
func listFolder(ctx context.Context, c *Client, root, folder uint64) ([]remoteItem, error) {
	u := fmt.Sprintf("/api/2/files/%d?include_children=true", root)
	if folder != 0 {
		u = fmt.Sprintf("/api/2/files/%d/folder/%d?include_children=true", root, folder)
	}
	var out struct {
		Children []remoteItem `json:"children"`
	}
	if err := c.GetJSON(ctx, u, &out); err != nil {
		return nil, err
	}
	return out.Children, nil
}

// floorSec is a time in ns as whole seconds, rounded down.
func floorSec(ns int64) int64 {
	s := ns / 1e9
	if ns < 0 && ns%1e9 != 0 {
		s--
	}
	return s
}

// sameChunks reports whether two chunk lists are the same contents.
func sameChunks(a, b []chunkInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Len != b[i].Len || !bytes.Equal(a[i].Sum, b[i].Sum) {
			return false
		}
	}
	return true
}
