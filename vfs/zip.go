package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"path"
	"strings"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"
)

// ZipOptions limit what WriteZip writes. The zero value writes the whole
// folder.
type ZipOptions struct {
	// FileIDs and FolderIDs, when either is non-empty, limit the top-level
	// entries to those children of the folder (files by FileIDs, folders by
	// FolderIDs; a folder chosen is written whole). Ids that are not live
	// children are ignored. Both empty: every child.
	FileIDs, FolderIDs []uint64
}

// Zip tuning. A zip of a folder is read once by a client that waits for it,
// so it favours speed: Deflate at flate's fastest level, and Store for data
// that would not shrink anyway.
const (
	// zipSampleSize is how much of a file is test-compressed to choose its
	// method. flate's fastest level gives up on incompressible data at
	// about 9 GB/s and compresses text at about 1.5 GB/s on this machine
	// class, so the test costs well under 1% of the copy.
	zipSampleSize = 64 << 10
	// zipMinSaving is the share of the sample compression must save for an
	// entry to be Deflated: below 10% the CPU is not worth the bytes.
	zipMinSavingPercent = 10
	// zipCopyBuffer is the size of the reads from a file; the context is
	// checked between them.
	zipCopyBuffer = 256 << 10
)

// compressedExt reports whether ext (lower case, with its dot) names a
// format that is compressed already; such entries are Stored without
// test-compressing a sample. (A switch, not a map, to keep the list
// immutable.)
func compressedExt(ext string) bool {
	switch ext {
	case ".7z", ".aac", ".apk", ".avi", ".avif", ".br", ".bz2", ".cab", ".deb",
		".docx", ".dmg", ".epub", ".flac", ".gif", ".gz", ".heic", ".heif", ".jar",
		".jpeg", ".jpg", ".jxl", ".lz", ".lz4", ".lzma", ".m4a", ".m4v", ".mkv",
		".mov", ".mp3", ".mp4", ".odp", ".ods", ".odt", ".ogg", ".opus", ".png",
		".pptx", ".rar", ".rpm", ".tgz", ".txz", ".webm", ".webp", ".whl", ".xlsx",
		".xz", ".zip", ".zst":
		return true
	}
	return false
}

// WriteZip writes a zip archive of a live folder of a root to w: every live
// file and folder below it, depth first in name order, with names relative to
// the folder ("a/b.txt"; folders as "a/" entries, so empty folders survive),
// UTF-8 names flagged as such, and modification times. The archive switches
// to Zip64 by itself past 4 GiB or 65,535 entries (the sizes of every entry
// follow it in a data descriptor, so nothing is buffered to learn them).
//
// Each file's method is chosen cheaply: Store for empty files and known
// compressed formats (by extension), otherwise its first 64 KiB are
// compressed at flate's fastest level and the entry is Deflated (at that
// level) only if the sample shrank by at least 10%.
//
// It streams: one file is open at a time and only a bounded buffer of it is
// held. Items deleted or moved away while the archive is written are left
// out. ctx is checked between entries and between reads inside a file; a
// cancelled ctx stops the work and returns its error. Any error (a missing
// folder before anything is written, a missing or corrupt chunk later) is
// returned as is; after bytes went out the archive in w is incomplete, so
// the caller must make the failure visible (an HTTP server aborts the
// connection) rather than end w as if it were whole.
func (fs *FS) WriteZip(ctx context.Context, w io.Writer, root, folder uint64, opts ZipOptions) error {
	kids, _, err := fs.List(ctx, root, folder)
	if err != nil {
		return err
	}
	z := &zipper{
		ctx:  ctx,
		fs:   fs,
		root: root,
		zw:   zip.NewWriter(w),
		buf:  make([]byte, zipCopyBuffer),
	}
	// The zip.Writer closes an entry only when the next one starts, so the
	// sample test needs its own flate writer.
	if z.flate, err = flate.NewWriter(io.Discard, flate.BestSpeed); err != nil {
		return fmt.Errorf("vfs: zip: %w", err)
	}
	if z.probe, err = flate.NewWriter(io.Discard, flate.BestSpeed); err != nil {
		return fmt.Errorf("vfs: zip: %w", err)
	}
	// One flate writer serves every entry in turn (entries are written one
	// after another), instead of one allocation per Deflated file.
	z.zw.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
		z.flate.Reset(out)
		return z.flate, nil
	})
	if len(opts.FileIDs)+len(opts.FolderIDs) > 0 {
		kids = pick(kids, opts)
	}
	if err := z.children(kids, "", folder); err != nil {
		return err
	}
	return z.zw.Close()
}

// pick keeps the children opts chose.
func pick(kids []Node, opts ZipOptions) []Node {
	want := make(map[uint64]bool, len(opts.FileIDs)+len(opts.FolderIDs))
	for _, id := range opts.FileIDs {
		want[id] = false
	}
	for _, id := range opts.FolderIDs {
		want[id] = true
	}
	out := kids[:0]
	for _, k := range kids {
		if dir, ok := want[k.ID]; ok && dir == k.Dir {
			out = append(out, k)
		}
	}
	return out
}

// zipper is the state of one WriteZip.
type zipper struct {
	ctx     context.Context
	fs      *FS
	root    uint64
	zw      *zip.Writer
	flate   *flate.Writer // compresses Deflated entries
	probe   *flate.Writer // test-compresses samples
	buf     []byte        // copy buffer
	samples [][]byte      // free head buffers (see open)
}

// children writes kids (listed children of folder parent) and everything
// below them, under prefix ("" or "a/b/"). A child deleted or moved out of
// parent since the listing is left out: it is not there any more, and one
// moved into a folder written later would otherwise appear twice. While
// one file is sent, the next child, when it is a file, is opened and its
// first chunk fetched and verified in the background, so that fetching
// overlaps with sending across files as it does within one (chunk.Reader
// prefetches the next chunk). At most two files are open at a time,
// however deep the tree.
func (z *zipper) children(kids []Node, prefix string, parent uint64) (err error) {
	var ahead *opening
	defer func() {
		if ahead != nil {
			z.discard(ahead)
		}
	}()
	for i, k := range kids {
		if err := z.ctx.Err(); err != nil {
			return err
		}
		name := prefix + k.Name
		if !k.Dir {
			cur := ahead
			if cur == nil {
				cur = z.open(k)
			}
			ahead = nil
			// Only the very next child: a file after a subfolder would
			// stay open (its head and the chunks its reader fetches
			// ahead) while the subfolder's whole tree is written, one
			// such file per level, so memory would grow with depth.
			if i+1 < len(kids) && !kids[i+1].Dir {
				ahead = z.open(kids[i+1])
			}
			err := z.file(k, name, parent, cur)
			z.discard(cur)
			if err != nil {
				return err
			}
			continue
		}
		sub, _, err := z.fs.List(z.ctx, z.root, k.ID)
		if errors.Is(err, ErrNotExist) {
			continue // deleted since its parent was listed
		}
		if err != nil {
			return err
		}
		now, err := z.fs.Stat(z.ctx, z.root, k.ID)
		if errors.Is(err, ErrNotExist) || (err == nil && (now.Deleted || now.ParentID != parent)) {
			continue // deleted or moved away since its parent was listed
		}
		if err != nil {
			return err
		}
		if _, err := z.header(k, name+"/", zip.Store); err != nil {
			return err
		}
		if err := z.children(sub, name+"/", k.ID); err != nil {
			return err
		}
	}
	return nil
}

// opening is a file being opened ahead of its entry: its first bytes read
// into head, by a goroutine that closes done.
type opening struct {
	done chan struct{}
	buf  []byte // from z.samples, returned by discard
	f    *File  // nil on error
	head []byte
	err  error
}

// open starts opening n and reading its head in the background. An empty
// file is opened too (it is read inline): it may have been deleted, moved
// or rewritten since the listing.
func (z *zipper) open(n Node) *opening {
	o := &opening{done: make(chan struct{})}
	if k := len(z.samples); k > 0 {
		o.buf, z.samples = z.samples[k-1], z.samples[:k-1]
	} else {
		o.buf = make([]byte, zipSampleSize)
	}
	go func() {
		defer close(o.done)
		f, err := z.fs.Open(z.ctx, z.root, n.ID)
		if err != nil {
			o.err = err
			return
		}
		o.f = f
		k, err := io.ReadFull(f, o.buf[:min(int64(len(o.buf)), f.Size())])
		o.head, o.err = o.buf[:k], err
	}()
	return o
}

// discard waits for o, closes its file and keeps its buffer for reuse.
func (z *zipper) discard(o *opening) {
	<-o.done
	if o.f != nil {
		o.f.Close()
	}
	if o.buf != nil {
		z.samples = append(z.samples, o.buf)
	}
}

// header starts an entry and returns the writer of its contents.
func (z *zipper) header(n Node, name string, method uint16) (io.Writer, error) {
	fh := &zip.FileHeader{
		Name:     name,
		Method:   method,
		Modified: n.Modified.UTC(),
		// Set the UTF-8 flag on every entry, not only on non-ASCII names as
		// the library would, so that no reader guesses a code page.
		Flags: 0x800,
	}
	if n.Dir {
		fh.SetMode(iofs.ModeDir | 0o755)
	} else {
		fh.SetMode(0o644)
	}
	w, err := z.zw.CreateHeader(fh)
	if err != nil {
		return nil, fmt.Errorf("vfs: zip: %s: %w", name, err)
	}
	return w, nil
}

// file writes one file entry from o, the file opened (see open), unless
// it left parent since parent was listed.
func (z *zipper) file(n Node, name string, parent uint64, o *opening) error {
	<-o.done
	if errors.Is(o.err, ErrNotExist) {
		return nil // deleted since its folder was listed
	}
	if o.err != nil {
		return fmt.Errorf("vfs: zip: read %s: %w", name, o.err)
	}
	if o.f.Node.ParentID != parent {
		return nil // moved away since its folder was listed
	}
	f := o.f
	n = f.Node // what is read, should it have changed since the listing
	if f.Size() == 0 {
		_, err := z.header(n, name, zip.Store)
		return err
	}

	// The head chooses the method and is then the entry's first bytes.
	method := zip.Store
	if !compressedExt(strings.ToLower(path.Ext(n.Name))) && z.compresses(o.head) {
		method = zip.Deflate
	}
	ew, err := z.header(n, name, method)
	if err != nil {
		return err
	}
	if _, err := ew.Write(o.head); err != nil {
		return fmt.Errorf("vfs: zip: %s: %w", name, err)
	}
	if _, err := io.CopyBuffer(ew, ctxReader{z.ctx, f}, z.buf); err != nil {
		return fmt.Errorf("vfs: zip: %s: %w", name, err)
	}
	return nil
}

// compresses reports whether flate's fastest level saves at least
// zipMinSavingPercent of b.
func (z *zipper) compresses(b []byte) bool {
	var c countingDiscard
	z.probe.Reset(&c)
	if _, err := z.probe.Write(b); err != nil {
		return false
	}
	if err := z.probe.Close(); err != nil {
		return false
	}
	return c.n*100 <= int64(len(b))*(100-zipMinSavingPercent)
}

// countingDiscard counts and drops what is written.
type countingDiscard struct{ n int64 }

func (c *countingDiscard) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// ctxReader fails reads once ctx is done, so a cancelled client stops a long
// copy within one buffer.
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
