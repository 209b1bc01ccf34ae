package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// restoreRun is one restore in progress, shown by status as a transfer.
type restoreRun struct {
	root   uint64
	target string // the server's form
	bytes  int64  // under backupManager.mu
	total  int64
}

func (r *restoreRun) transfer() Transfer {
	return Transfer{Kind: "restore", RootID: r.root, Path: r.target, Bytes: r.bytes, Total: r.total}
}

// RestoreReport is what a restore did, kept as last-restore.json in the
// backup's state folder.
type RestoreReport struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	OK       bool      `json:"ok"`
	Error    string    `json:"error,omitempty"`
	Path     string    `json:"path"`
	Target   string    `json:"target"`
	Files    int64     `json:"files"`
	Bytes    int64     `json:"bytes"`
}

// maxRestores bounds the restores a machine runs (or waits to run, one
// backup root's after another) at once: each holds a goroutine and its
// transfers, and a server, or whoever holds it, must not have the agent
// start them without end.
const maxRestores = 4

// restoreCmd answers restore {root_id, path, target}: once the target is
// allowed (docs/agent.md "Restore"), it answers {} and writes the
// backup root's folder path into target in the background.
func (m *backupManager) restoreCmd(ctx context.Context, args json.RawMessage) (any, error) {
	var in struct {
		RootID uint64 `json:"root_id"`
		Path   string `json:"path"`
		Target string `json:"target"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.RootID == 0 || in.Target == "" {
		return nil, &APIError{Code: "invalid_request", Description: "restore takes {root_id, path, target}"}
	}
	m.mu.Lock()
	j := m.jobs[in.RootID]
	m.mu.Unlock()
	if j == nil {
		return nil, &APIError{Code: "not_found", Description: "this machine has no backup into that root"}
	}
	target := filepath.Clean(localPath(in.Target))
	if !filepath.IsAbs(target) {
		return nil, &APIError{Code: "invalid_request", Description: "the target must be an absolute path"}
	}
	if err := targetAllowed(j.local, target); err != nil {
		return nil, err
	}
	src := path.Clean("/" + in.Path)
	run := &restoreRun{root: j.root, target: in.Target}
	m.mu.Lock()
	if len(m.restores) >= maxRestores {
		m.mu.Unlock()
		return nil, &APIError{Code: "temporarily_unavailable", Description: fmt.Sprintf("this machine already runs %d restores; ask again when one has ended", maxRestores)}
	}
	m.restores[run] = struct{}{}
	m.mu.Unlock()
	go func() {
		// A restore outlives the channel that asked for it.
		rep := RestoreReport{Started: time.Now(), Path: src, Target: in.Target}
		err := m.restore(context.WithoutCancel(ctx), j, run, src, target, &rep)
		rep.Finished, rep.OK = time.Now(), err == nil
		if err != nil {
			rep.Error = err.Error()
			m.a.log.Warn("restore failed", "root", j.root, "target", target, "err", err)
		}
		m.mu.Lock()
		delete(m.restores, run)
		m.mu.Unlock()
		if b, err := json.MarshalIndent(rep, "", "  "); err == nil {
			_ = writePrivate(filepath.Join(m.jobDir(j.root), "last-restore.json"), b)
		}
	}()
	return struct{}{}, nil
}

// targetAllowed is the target rule: the backup's own folder or a folder
// inside it, or a folder that is empty or does not exist yet. Anything
// else could overwrite files the backup never held.
func targetAllowed(backup, target string) error {
	if target == backup || strings.HasPrefix(target, backup+string(filepath.Separator)) {
		return nil
	}
	fi, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	refuse := &APIError{Code: "invalid_request", Description: "a restore's target must be the backup's folder or inside it, or a folder that is empty or does not exist"}
	if err != nil || !fi.IsDir() {
		return refuse
	}
	d, err := os.Open(target)
	if err != nil {
		return refuse
	}
	defer d.Close()
	if names, _ := d.Readdirnames(1); len(names) > 0 {
		return refuse
	}
	return nil
}

// restore writes the folder src of j's root into target. It holds j's
// run lock, so no backup run reads a half-restored folder. Every write
// goes through an os.Root of the folder it may write in: a symbolic link
// already on the disk (in the backup's folder, or on the way to a target
// inside it) is followed only where it stays inside that folder, so a
// restore never writes where the link leads outside it.
func (m *backupManager) restore(ctx context.Context, j *backupJob, run *restoreRun, src, target string, rep *RestoreReport) error {
	j.runMu.Lock()
	defer j.runMu.Unlock()
	c := m.a.client
	var folder uint64
	if src != "/" {
		for _, seg := range strings.Split(src[1:], "/") {
			items, err := listFolder(ctx, c, j.root, folder)
			if err != nil {
				return err
			}
			folder = 0
			for _, it := range items {
				if it.Type == "folder" && path.Base(it.Path) == seg {
					folder = it.ID
				}
			}
			if folder == 0 {
				return fmt.Errorf("agent: the backup has no folder %s", src)
			}
		}
	}
	dst, err := openTarget(filepath.Clean(j.local), target)
	if err != nil {
		return err
	}
	defer dst.Close()
	return m.restoreFolder(ctx, j.root, folder, dst, ".", run, rep)
}

// openTarget makes the restore's target folder and opens it as a Root. A
// target inside the backup's folder is made and opened through a Root of
// that folder (targetAllowed checked it only by name; a link on the way
// must not lead out); any other target is new or empty, a folder the
// caller named.
func openTarget(backup, target string) (*os.Root, error) {
	rel, err := filepath.Rel(backup, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return nil, err
		}
		return os.OpenRoot(target)
	}
	if err := os.MkdirAll(backup, 0o755); err != nil {
		return nil, err
	}
	b, err := os.OpenRoot(backup)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if err := b.MkdirAll(rel, 0o755); err != nil {
		return nil, fmt.Errorf("agent: the restore's target %s: %w", target, err)
	}
	return b.OpenRoot(rel)
}

// restoreFolder writes folder of root into dir, a folder of dst.
func (m *backupManager) restoreFolder(ctx context.Context, root, folder uint64, dst *os.Root, dir string, run *restoreRun, rep *RestoreReport) error {
	items, err := listFolder(ctx, m.a.client, root, folder)
	if err != nil {
		return err
	}
	m.mu.Lock()
	for _, it := range items {
		if it.Type == "file" {
			run.total += it.Size
		}
	}
	m.mu.Unlock()
	for _, it := range items {
		name := path.Base(it.Path)
		if !localName(name) {
			continue // not a name this machine can hold
		}
		p := filepath.Join(dir, name)
		if it.Type == "folder" {
			if err := dst.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("agent: restoring %s: %w", it.Path, err)
			}
			if err := m.restoreFolder(ctx, root, it.ID, dst, p, run, rep); err != nil {
				return err
			}
			continue
		}
		if err := m.download(ctx, root, it, dst, dir, p, run); err != nil {
			return fmt.Errorf("agent: restoring %s: %w", it.Path, err)
		}
		rep.Files++
		rep.Bytes += it.Size
	}
	return nil
}

// download streams file it into a temporary file in dir, gives it its
// modification time, and renames it to p (dir and p in dst): p is the
// old file or the whole restored one, never a part. A link at p is
// replaced, not written through.
func (m *backupManager) download(ctx context.Context, root uint64, it remoteItem, dst *os.Root, dir, p string, run *restoreRun) error {
	c := m.a.client
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/2/files/%d/%d/download", c.base, root, it.ID), nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	if err := CheckResponse(resp); err != nil {
		return err
	}
	defer resp.Body.Close()
	tmp, f, err := createTemp(dst, dir, ".berth-restore-")
	if err != nil {
		return err
	}
	defer dst.Remove(tmp)
	n, err := io.Copy(f, &restoreProgress{r: resp.Body, m: m, run: run})
	if err == nil && n != it.Size {
		err = fmt.Errorf("%d bytes arrived, the file has %d", n, it.Size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if mt, perr := time.ParseInLocation(apiTime, it.Modified, time.UTC); perr == nil {
		if err := dst.Chtimes(tmp, mt, mt); err != nil {
			return err
		}
	}
	return dst.Rename(tmp, p)
}

// createTemp creates a new file in dir of r named prefix and a random
// suffix, as os.CreateTemp does outside a Root, and returns its name (in
// r) and the file, open for writing. Unlike os.CreateTemp's 0600, it has
// the mode a file made here by the person gets (0666 less their umask:
// 0644 under the usual 022, 0600 under 077): it becomes a file of theirs
// by a rename, and a fixed 0644 gave group and others the read a
// private umask withholds.
func createTemp(r *os.Root, dir, prefix string) (string, *os.File, error) {
	for range 100 {
		var b [8]byte
		rand.Read(b[:])
		name := filepath.Join(dir, prefix+hex.EncodeToString(b[:]))
		f, err := r.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return name, f, err
	}
	return "", nil, fmt.Errorf("agent: no free temporary name in %s", dir)
}

type restoreProgress struct {
	r   io.Reader
	m   *backupManager
	run *restoreRun
}

func (p *restoreProgress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.m.mu.Lock()
		p.run.bytes += int64(n)
		p.m.mu.Unlock()
	}
	return n, err
}
