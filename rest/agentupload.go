package rest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"berth/httpserve"
	"berth/share"
	"berth/vfs"
)

// agentUploadRoutes registers berth's own routes for `berth agent`'s
// backups (docs/agent.md "Backups", docs/api.md "Agent writes"): a write
// by path that sends a file as a delta against its current revision, and
// the trigger of a backup run.
func (s *server) agentUploadRoutes() {
	s.handle("POST /api/2/agent/files/{root_id}/write", s.authed(s.agentWrite))
	s.handle("POST /api/2/machine/{machine_id}/backup/{root_id}/start", s.authed(s.startBackup))
}

// errBaseRevision is a delta whose base revision is not the file's current
// one (or names a file that is not there): the client sends the whole
// file instead.
var errBaseRevision = errors.New("agent write: the base revision is not the file's current revision")

// maxCopiedPerBase bounds a delta's copies, all together, to this many
// times its base revision's size. Copies may repeat a range (a file of
// repeated chunks), but each is a few bytes of body for up to the whole
// base, so without a bound a small body had the server compose, hash and
// store terabytes (and no quota or max_file_size need bind it). With
// it, a write costs the server at most what a download of its base
// twice does, plus its literal bytes. A delta over the bound is 409 as a
// stale base is: the agent sends the file whole then.
const maxCopiedPerBase = 2

// The operations of a delta body (docs/api.md "Agent writes"). Each is one
// byte followed by unsigned varints (encoding/binary's Uvarint).
const (
	deltaCopy = 'C' // offset, length: bytes of the base revision
	deltaData = 'D' // length, then that many literal bytes
	deltaEnd  = 'E' // the end; nothing may follow
)

// agentWrite answers POST /api/2/agent/files/{root_id}/write: a
// multipart/form-data body of the fields path, type (file or folder),
// modified and base_revision, then, for a file, the part `delta`. Folders
// above path that are missing are made. The new contents are composed
// while they are read, from ranges of the base revision and the part's
// literal bytes, and stored through the same streamed write as any
// upload; nothing is held whole. A base revision that is not the file's
// current one is 409, checked before the body is read and again at the
// commit.
func (s *server) agentWrite(r *http.Request) (_ any, err error) {
	a, err := s.access(r)
	if err != nil {
		return nil, err
	}
	if a.root.Type == vfs.RootBackup && !a.policy.BackupsEnabled {
		// The agent's runs write here: with backups_enabled off they
		// store nothing more, whenever the policy changed.
		return nil, Describe(ErrForbidden, "the organization's policy does not allow backups (backups_enabled)")
	}
	ct, params, perr := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if perr != nil || ct != "multipart/form-data" || params["boundary"] == "" {
		return nil, Describe(ErrInvalidRequest, "an agent write is a multipart/form-data body: the fields path, type, modified, base_revision, then the part `delta`")
	}
	mr, orig, head, err := streamedMultipart(r)
	defer func() {
		if err != nil {
			httpserve.Drain(r, orig)
		}
	}()
	if err != nil {
		return nil, err
	}
	budget := &fieldBudget{left: maxFormBytes, parts: maxFormParts}
	fields := map[string]string{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			if fields["type"] == "folder" {
				return s.agentMkdir(r, a, fields)
			}
			return nil, Describe(ErrNoFileReceived, "the part `delta` is missing")
		}
		if err != nil {
			return nil, bodyError(r, err)
		}
		if p.FormName() != "delta" {
			v, err := budget.read(p)
			if errors.Is(err, errUploadHead) {
				return nil, bodyError(r, err)
			}
			if err != nil {
				return nil, err
			}
			fields[p.FormName()] = v
			continue
		}
		if fields["type"] == "folder" {
			return nil, Describe(ErrInvalidRequest, "a folder takes no part `delta`")
		}
		head.left = -1 // the file's contents: the policy's limits apply
		return s.agentPut(r, a, fields, &partReader{r: p})
	}
}

// agentTarget reads the fields every agent write has: the item's path
// (absolute, clean, not the root itself), its folder's path and name, and
// the modification time.
func agentTarget(fields map[string]string) (dir, name string, modified time.Time, err error) {
	p := fields["path"]
	if p == "" {
		return "", "", modified, Describe(ErrInvalidRequest, "missing parameter \"path\"")
	}
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" {
		return "", "", modified, Describe(ErrInvalidRequest, "path must be an absolute, clean path of an item in the root, such as /docs/a.txt")
	}
	if strings.Count(p, "/") > vfs.MaxDepth {
		// Refused before a folder above is looked up or made: each
		// level's lookup walks the path again, so a long path cost the
		// server time in its square, and left the levels that fit.
		return "", "", modified, vfs.ErrTooDeep
	}
	switch fields["type"] {
	case "", "file", "folder":
	default:
		return "", "", modified, Describe(ErrInvalidRequest, "type must be file or folder")
	}
	if m := fields["modified"]; m != "" {
		if modified, err = parseDateTime(m); err != nil {
			if modified, err = time.Parse(time.RFC3339Nano, m); err != nil {
				return "", "", modified, Describe(ErrInvalidDatetimeFormat, "modified must be YYYY-MM-DDTHH:MM:SS or RFC 3339 with fractional seconds")
			}
		}
	}
	dir, name = path.Split(p)
	return path.Clean(dir), name, modified, nil
}

// agentMkdir makes the folder at fields' path and those above it that
// are missing; a folder already there is answered as it is.
func (s *server) agentMkdir(r *http.Request, a fsAccess, fields map[string]string) (any, error) {
	dir, name, _, err := agentTarget(fields)
	if err != nil {
		return nil, err
	}
	n, err := s.mkdirAll(r.Context(), a, path.Join(dir, name))
	if err != nil {
		return nil, err
	}
	return encodeFolder(n, a.perms), nil
}

// mkdirAll returns the folder at p, making it and the folders above it
// where they are missing (vfs.MkdirAll, in one transaction). An item in
// the way that is a file is name_conflict. A lookup and a Mkdir per
// level walked the path again at each: a file 1,000 levels deep in new
// folders read the store some 3 million times.
func (s *server) mkdirAll(ctx context.Context, a fsAccess, p string) (vfs.Node, error) {
	n, err := s.fs.MkdirAll(ctx, a.root.ID, p, a.opts)
	if errors.Is(err, vfs.ErrNameConflict) {
		return vfs.Node{}, Describe(vfs.ErrNameConflict, "%v", err)
	}
	return n, err
}

// agentPut stores body, a delta, as the file at fields' path.
func (s *server) agentPut(r *http.Request, a fsAccess, fields map[string]string, body *partReader) (any, error) {
	ctx := r.Context()
	dir, name, modified, err := agentTarget(fields)
	if err != nil {
		return nil, err
	}
	var base uint64
	if b := fields["base_revision"]; b != "" {
		var ok bool
		if base, ok = parseID(b); !ok {
			return nil, Describe(ErrInvalidRequest, "base_revision must be a revision's id")
		}
		if !slices.Contains(a.perms, permRead) {
			// Copying from a revision is reading it.
			return nil, Describe(ErrForbidden, "a delta against a revision needs read permission on the root")
		}
	}
	parent, err := s.mkdirAll(ctx, a, dir)
	if err != nil {
		return nil, err
	}
	opts, err := s.uploadOptions(ctx, r, a, parent.ID, name)
	if err != nil {
		return nil, nameError(false, err)
	}
	opts.Modified = modified
	d := &deltaReader{src: bufio.NewReaderSize(body, 64<<10)}
	if base != 0 {
		cur, err := s.fs.Lookup(ctx, a.root.ID, path.Join(dir, name))
		if errors.Is(err, vfs.ErrNotExist) || (err == nil && (cur.Dir || cur.RevisionID != base)) {
			return nil, errBaseRevision
		}
		if err != nil {
			return nil, err
		}
		f, err := s.fs.OpenRevision(ctx, a.root.ID, cur.ID, base)
		if errors.Is(err, vfs.ErrNotExist) {
			return nil, errBaseRevision
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		d.base, d.baseSize = f, f.Size()
		// The file must still be at base when the new revision commits.
		opts.IfAbsent, opts.IfRevision = false, base
	}
	// Without a base the caller's copy replaces what is stored (any
	// condition set above is the policy's, checked again at the commit).
	n, err := s.fs.WriteFile(ctx, a.root.ID, parent.ID, name, d, opts)
	switch {
	case err != nil && body.err != nil:
		return nil, bodyError(r, body.err)
	case err != nil && d.err != nil && errors.Is(d.err, errBaseRevision):
		return nil, d.err
	case err != nil && d.err != nil:
		return nil, Describe(ErrInvalidRequest, "%v", d.err)
	case errors.Is(err, vfs.ErrChanged):
		return nil, errBaseRevision
	case err != nil:
		return nil, nameError(false, err)
	}
	return encodeFile(n, a.perms), nil
}

// deltaReader composes a file's new contents from a delta body: ranges
// of the base revision and literal bytes, in the order the body gives
// them. A malformed body fails the read with err set, so the write stores
// nothing and the client is told what was wrong.
type deltaReader struct {
	src      *bufio.Reader
	base     io.ReadSeeker // nil without a base revision
	baseSize int64
	copied   int64     // bytes of the base copied so far
	cur      io.Reader // the operation being read; nil between them
	left     int64     // bytes cur still owes
	literal  bool
	ended    bool
	err      error
}

func (d *deltaReader) fail(format string, args ...any) (int, error) {
	d.err = fmt.Errorf("delta: "+format, args...)
	return 0, d.err
}

func (d *deltaReader) Read(p []byte) (int, error) {
	for {
		if d.err != nil {
			return 0, d.err
		}
		if d.cur != nil {
			if int64(len(p)) > d.left {
				p = p[:d.left]
			}
			n, err := d.cur.Read(p)
			d.left -= int64(n)
			if d.left == 0 {
				d.cur = nil
				return n, nil
			}
			if err == io.EOF {
				if d.literal {
					return d.fail("the body ended inside a literal run")
				}
				return d.fail("the base revision ended before a copied range") // changed under us
			}
			return n, err
		}
		if d.ended {
			return 0, io.EOF
		}
		op, err := d.src.ReadByte()
		if err == io.EOF {
			return d.fail("the body ended without its end mark %q", deltaEnd)
		}
		if err != nil {
			return 0, err
		}
		switch op {
		case deltaEnd:
			if _, err := d.src.ReadByte(); err != io.EOF {
				if err != nil {
					return 0, err
				}
				return d.fail("bytes follow the end mark")
			}
			d.ended = true
		case deltaCopy:
			off, err1 := binary.ReadUvarint(d.src)
			n, err2 := binary.ReadUvarint(d.src)
			if err := errors.Join(err1, err2); err != nil {
				return d.fail("a copy's offset and length must be unsigned varints")
			}
			if d.base == nil {
				return d.fail("a copy needs base_revision")
			}
			if n == 0 || off > math.MaxInt64 || n > math.MaxInt64-off || int64(off+n) > d.baseSize {
				return d.fail("the copy of %d bytes at %d is outside the base revision's %d bytes", n, off, d.baseSize)
			}
			if _, err := d.base.Seek(int64(off), io.SeekStart); err != nil {
				return 0, err
			}
			if d.copied += int64(n); d.copied > maxCopiedPerBase*d.baseSize {
				d.err = Describe(errBaseRevision, "the delta copies more than %d times its base revision's %d bytes: send the whole file", maxCopiedPerBase, d.baseSize)
				return 0, d.err
			}
			d.cur, d.left, d.literal = d.base, int64(n), false
		case deltaData:
			n, err := binary.ReadUvarint(d.src)
			if err != nil || n == 0 || n > math.MaxInt64 {
				return d.fail("a literal run's length must be a positive unsigned varint")
			}
			d.cur, d.left, d.literal = d.src, int64(n), true
		default:
			return d.fail("unknown operation %q", op)
		}
	}
}

// startBackup answers POST
// /api/2/machine/{machine_id}/backup/{root_id}/start (berth's): the
// machine's agent starts a run of the backup now rather than at its next
// scheduled time. It answers once the agent has accepted; status shows
// the run as a transfer. An offline machine is 503.
func (s *server) startBackup(r *http.Request) (any, error) {
	m, b, err := s.backupOf(r, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	// backups_enabled turned off after the backup was set up stops it
	// here as at backups/create.
	owner, err := s.accounts.Person(r.Context(), m.PersonID)
	if err != nil {
		return nil, err
	}
	pol, err := s.ownerPolicy(r.Context(), owner)
	if err != nil {
		return nil, err
	}
	if !pol.BackupsEnabled {
		return nil, Describe(ErrForbidden, "the organization's policy does not allow backups (backups_enabled)")
	}
	args := map[string]uint64{"root_id": b.RootID}
	return nil, s.callAgent(r.Context(), m.ID, "backup_now", args, nil)
}
