package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"time"

	"berth/kv"
	"berth/vfs/chunk"

	"github.com/fxamacker/cbor/v2"
)

// Staged uploads let a large upload arrive in pieces, over several
// requests and across restarts of the process, and become a file only
// once all of it is there (the tus protocol's resumable uploads, served
// by rest).
//
// The bytes go into the chunk store as they arrive, through the same
// chunk writer as WriteFile, and the upload keeps the list of its chunks
// in kv: Finish commits that list as the file's revision, copying
// nothing. The list is sealed chunks plus a tail. The sealed chunks end
// where the content-defined chunker cut them; the tail is the last chunk
// of the last append, which ended where the request did. The next append
// re-reads the tail (at most one chunk, 4 MiB) and cuts it again with the
// new bytes, so the chunks of a file uploaded in many pieces are exactly
// those of the same file written at once: it deduplicates as well, and
// no chunker state needs to survive between requests.
//
// Each sealed batch of chunks holds a reference count in kv (its part,
// W/<upload>/<part>), as a revision's chunks do, so the collector keeps
// them across restarts; the tail holds one too. The declared length is
// reserved against the quotas at Stage (usageRec.Reserved), so a quota
// sees the uploads in flight, and given back when the upload is finished,
// terminated or expires, or once its owner may no longer write its target
// (StagedHolder). Under a quota others write under too, an owner's
// uploads reserve at most their fair share of it (fair.go). An upload
// not appended to for its TTL expires: ExpireStaged (which the daemon
// runs periodically) terminates it, and every method treats it as gone
// from its expiry on.

// StageOptions describe a staged upload.
type StageOptions struct {
	// Length is the size the file will have, declared up front: the
	// policy and the quotas are checked against it at Stage.
	Length int64
	// TTL is how long the upload lives without an append; each append
	// moves its expiry to TTL after it. 0 or less means DefaultStagedTTL.
	TTL time.Duration
	// Owner is opaque to vfs: the front end's name for who may go on
	// with the upload.
	Owner string
	// Meta is kept with the upload and given back as it is (tus's
	// Upload-Metadata).
	Meta map[string]string
	// MaxPerOwner bounds the uploads in progress Owner may have at once,
	// this one included: past it Stage is ErrTooManyStaged. 0 or less:
	// no bound. An upload is in progress from Stage until it is finished,
	// terminated or expired; without a bound, one client that staged
	// uploads and sent nothing grew, for a TTL, the records that every
	// listing of the uploads, every scrape of the gauges and the quota's
	// room-making read, whoever asked.
	MaxPerOwner int
}

// MaxStagedLength bounds the length a staged upload declares (1 PiB, far
// past what one commit of its chunk list takes). The length is reserved
// against the quotas before a byte is stored, so without a bound a
// client chose a number that the quotas' sums overflowed on.
const MaxStagedLength = 1 << 50

// maxHeld bounds what a root holds and reserves when no quota bounds it
// less (64 PiB), checked as its space quota when an upload is staged: a
// reservation is declared, not stored, and without a bound 8192 uploads
// of MaxStagedLength on a root without quotas summed past math.MaxInt64,
// wrapping its usage and its tallies' below 0 (shown as such, and every
// write refused once a quota was set).
const maxHeld = 1 << 56

// DefaultStagedTTL is the life of a staged upload without an append.
const DefaultStagedTTL = 24 * time.Hour

// Staged is the state of a staged upload.
type Staged struct {
	ID     uint64
	Root   uint64
	Parent uint64
	Name   string
	// Length is the declared size; Offset how much of it is stored.
	Length int64
	Offset int64
	// Reserved is what the upload holds against the quotas: Length but
	// for what passed its owner's fair share when it was staged (fair.go).
	Reserved int64
	Created  time.Time
	Expires  time.Time
	Owner    string
	Meta     map[string]string
	// Done is the file a finished upload became (StagedFinished); 0
	// for an upload in progress.
	Done uint64
}

// AppendOptions check an append.
type AppendOptions struct {
	// Hash, when set, is fed the appended bytes, and Sum is what it must
	// sum to: otherwise the append stores nothing and is
	// ErrChecksumMismatch.
	Hash hash.Hash
	Sum  []byte
	// Every, when above 0 and Hash is nil, commits what arrived each
	// time this many more bytes have been stored, as a piece of its
	// own: a crash (the process killed, the power cut) during a long
	// append then loses at most this much and the last chunk, where it
	// lost everything the append had brought (tus-js-client sends a
	// whole file as one PATCH). A body that fails loses only what came
	// since the last commit, and one whose upload another request
	// appended to between two of its segments ends there, with
	// ErrUploadOffset. With Hash the append commits once, at its end: a
	// mismatch stores nothing of it.
	Every int64
}

// stagedRec is a staged upload, S/<upload>. Field numbers are the wire
// format.
type stagedRec struct {
	Root   uint64 `cbor:"1,keyasint"`
	Parent uint64 `cbor:"2,keyasint"`
	Name   string `cbor:"3,keyasint"`
	Length int64  `cbor:"4,keyasint"`
	// Sealed is the size of the chunks in the parts, Parts their number.
	Sealed int64  `cbor:"5,keyasint,omitempty"`
	Parts  uint64 `cbor:"6,keyasint,omitempty"`
	// Tail is the last chunk appended, none or one.
	Tail    []chunk.Ref       `cbor:"7,keyasint,omitempty"`
	Created int64             `cbor:"8,keyasint"`
	Expires int64             `cbor:"9,keyasint"`
	TTL     int64             `cbor:"10,keyasint"`
	Owner   string            `cbor:"11,keyasint,omitempty"`
	Meta    map[string]string `cbor:"12,keyasint,omitempty"`
	// CRC is the CRC-32 (IEEE) of the bytes stored so far, carried on
	// by each append so that Finish gives the revision its CRC as
	// WriteFile does (a zip's headers need it before its contents).
	// Nil when unknown: an upload staged by a berth that did not keep
	// it, or one whose append committed in part; the revision then has
	// none, and its first zip computes it (Zip).
	CRC *uint32 `cbor:"13,keyasint,omitempty"`
	// Done is the file a finished upload became. The record stays, with
	// no chunks and no reservation, until finishedGrace has passed, so
	// that a second Finish (the one of the request that sent the last
	// piece, after a HEAD made the file first) learns that it succeeded.
	Done uint64 `cbor:"14,keyasint,omitempty"`
	// Unreserved is the part of Length not reserved: past the owner's
	// fair share of a quota others write under (fair.go). Finish checks
	// it against the quotas.
	Unreserved int64 `cbor:"15,keyasint,omitempty"`
	// Owned says that what the upload reserves is counted in its owner's
	// A/ record, which ending it takes it out of: false for an upload
	// staged by a berth that did not count them.
	Owned bool `cbor:"16,keyasint,omitempty"`
	// Counted says that the upload is counted in its owner's count of
	// uploads in progress (ownerStagedKey), which ending it takes it out
	// of: false for an upload staged by a berth that did not count them,
	// and for a finished upload's record.
	Counted bool `cbor:"17,keyasint,omitempty"`
}

// reserved is what the upload reserves against the quotas.
func (r stagedRec) reserved() int64 { return r.Length - r.Unreserved }

// countStaged counts one more upload in progress of owner, or is
// ErrTooManyStaged when owner has max of them already (max 0 or less: no
// bound). The count is read and written in the transaction that stages
// the upload, so uploads staged at once conflict and none passes max.
func countStaged(tx kv.Txn, owner string, max int) error {
	k := ownerStagedKey(owner)
	var n int64
	if err := get(tx, k, &n, nil); err != nil {
		return err
	}
	if max > 0 && n >= int64(max) {
		return fmt.Errorf("%w: %d uploads in progress, at most %d", ErrTooManyStaged, n, max)
	}
	return put(tx, k, n+1)
}

// finishedGrace is how long a finished upload's record answers a second
// Finish. The race it covers lasts from an append's commit to the Finish
// of the same request.
const finishedGrace = 10 * time.Minute

// stagedPart is one batch of sealed chunks, W/<upload>/<part>, at most
// refBatch of them, each holding one count on its K/ key.
type stagedPart struct {
	Chunks []chunk.Ref `cbor:"1,keyasint"`
}

func (r stagedRec) offset() int64 {
	o := r.Sealed
	for _, t := range r.Tail {
		o += t.Size
	}
	return o
}

func (r stagedRec) public(id uint64) Staged {
	return Staged{
		ID: id, Root: r.Root, Parent: r.Parent, Name: r.Name, Length: r.Length, Offset: r.offset(), Reserved: r.reserved(),
		Created: time.Unix(0, r.Created).UTC(), Expires: time.Unix(0, r.Expires).UTC(), Owner: r.Owner, Meta: r.Meta,
	}
}

// loadStaged reads upload id in tx; a missing or expired one is
// ErrNotExist.
func (fs *FS) loadStaged(tx kv.Txn, id uint64) (stagedRec, error) {
	var rec stagedRec
	if err := get(tx, stagedKey(id), &rec, fmt.Errorf("%w: staged upload %d", ErrNotExist, id)); err != nil {
		return rec, err
	}
	if rec.Done != 0 {
		return rec, fmt.Errorf("%w: staged upload %d finished", ErrNotExist, id)
	}
	if rec.Expires <= fs.nowNs() {
		return rec, fmt.Errorf("%w: staged upload %d expired", ErrNotExist, id)
	}
	return rec, nil
}

// Stage starts a staged upload of so.Length bytes that Finish makes the
// file name in the folder parent. It refuses up front what a WriteFile of
// that length would be refused (a bad name, an excluded extension, a
// length over opts.MaxFileSize or the quotas of opts, the name taken by a
// folder, a lock, opts.IfAbsent or IfRevision) and reserves the length
// against the quotas until the upload ends, but for what passes its
// owner's fair share of a quota others write under (fair.go), which is
// checked again at Finish.
func (fs *FS) Stage(ctx context.Context, root, parent uint64, name string, so StageOptions, opts WriteOptions) (Staged, error) {
	if err := ValidateName(name); err != nil {
		return Staged{}, err
	}
	if excluded(name, opts.ExcludedExtensions) {
		return Staged{}, fmt.Errorf("%w: %q", ErrExtensionExcluded, extension(name))
	}
	if so.Length < 0 {
		return Staged{}, fmt.Errorf("%w: a negative length", ErrFileTooLarge)
	}
	if so.Length > MaxStagedLength {
		return Staged{}, fmt.Errorf("%w: %d bytes announced, a staged upload holds at most %d", ErrFileTooLarge, so.Length, MaxStagedLength)
	}
	if opts.MaxFileSize > 0 && so.Length > opts.MaxFileSize {
		return Staged{}, fmt.Errorf("%w: %d bytes announced, at most %d", ErrFileTooLarge, so.Length, opts.MaxFileSize)
	}
	if err := fs.roomFor(); err != nil {
		return Staged{}, err
	}
	ttl := so.TTL
	if ttl <= 0 {
		ttl = DefaultStagedTTL
	}
	id, err := fs.db.NextID(ctx, "staged")
	if err != nil {
		return Staged{}, err
	}
	var rec stagedRec
	stage := func(tx kv.Txn) error {
		now := fs.nowNs()
		if _, err := fs.checkWrite(tx, root, parent, name, opts, now); err != nil {
			return err
		}
		lim := limitsOf(opts)
		firm, err := lim.firm(tx, so.Owner, so.Length)
		if err != nil {
			return err
		}
		if lim.space <= 0 || lim.space > maxHeld {
			lim.space = maxHeld
		}
		// The whole length must fit; the firm part is reserved.
		if err := lim.check(tx, root, so.Length); err != nil {
			return err
		}
		if err := fs.addUsage(ctx, tx, root, usageRec{Reserved: firm}, limits{}); err != nil {
			return err
		}
		if err := addOwned(tx, so.Owner, root, firm); err != nil {
			return err
		}
		if err := addAnnounced(tx, so.Owner, root, so.Length-firm); err != nil {
			return err
		}
		if err := countStaged(tx, so.Owner, so.MaxPerOwner); err != nil {
			return err
		}
		rec = stagedRec{
			Root: root, Parent: parent, Name: name, Length: so.Length, Unreserved: so.Length - firm, Owned: true,
			Created: now, Expires: now + int64(ttl), TTL: int64(ttl), Owner: so.Owner, Meta: so.Meta,
			CRC: new(uint32), Counted: true,
		}
		return put(tx, stagedKey(id), rec)
	}
	err = fs.update(ctx, stage)
	if errors.Is(err, ErrQuotaExceeded) && fs.freeRoom(ctx, root, limitsOf(opts)) > 0 {
		err = fs.update(ctx, stage)
	}
	if err != nil {
		return Staged{}, err
	}
	return rec.public(id), nil
}

// StagedInfo returns the state of upload id; ErrNotExist once it is
// finished, terminated or expired.
func (fs *FS) StagedInfo(ctx context.Context, id uint64) (Staged, error) {
	var rec stagedRec
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		var err error
		rec, err = fs.loadStaged(tx, id)
		return err
	})
	return rec.public(id), err
}

// StagedFinished returns upload id as it was finished, less than
// finishedGrace ago: every byte stored (Offset is Length) and Done the
// file it became. ErrNotExist for an upload in progress, terminated,
// expired, or finished longer ago. A client whose last append's answer
// was lost asks for the offset again: a tus client takes an offset equal
// to the length for success, where not finding the upload makes it send
// the whole file again as a new one.
func (fs *FS) StagedFinished(ctx context.Context, id uint64) (Staged, error) {
	var rec stagedRec
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		return get(tx, stagedKey(id), &rec, fmt.Errorf("%w: staged upload %d", ErrNotExist, id))
	})
	if err != nil {
		return Staged{}, err
	}
	if rec.Done == 0 || rec.Expires <= fs.nowNs() {
		return Staged{}, fmt.Errorf("%w: staged upload %d is not finished", ErrNotExist, id)
	}
	st := rec.public(id)
	st.Offset, st.Done = rec.Length, rec.Done
	return st, nil
}

// Append stores what r yields as the bytes of upload id from offset on,
// which must be the upload's offset (ErrUploadOffset otherwise), and
// returns the new state. It stores what r yields up to its first error
// or EOF: a front end that wants the bytes of a broken request kept hands
// a reader that ends at the break. Bytes past the declared length are
// ErrFileTooLarge, a mismatch with ao's checksum ErrChecksumMismatch;
// either stores nothing. An upload whose root is deleted (or gone) is
// ErrRootDeleted (ErrNotExist), and is ended: it could never become a
// file. Each append moves the expiry TTL ahead, at its
// commit and, while bytes arrive, each time half the TTL has gone by
// (keepStaged).
func (fs *FS) Append(ctx context.Context, id uint64, offset int64, r io.Reader, ao AppendOptions) (Staged, error) {
	if err := fs.beginUpload(); err != nil {
		return Staged{}, err
	}
	defer fs.endUpload()
	var rec stagedRec
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		var err error
		if rec, err = fs.loadStaged(tx, id); err != nil {
			return err
		}
		return stagedRootLive(tx, id, rec)
	})
	if err != nil {
		return Staged{}, fs.endOrphan(ctx, id, err)
	}
	if rec.offset() != offset {
		return rec.public(id), fmt.Errorf("%w: the upload is at %d, not %d", ErrUploadOffset, rec.offset(), offset)
	}
	body := r
	if rec.TTL > 0 {
		body = &keepStaged{r: r, fs: fs, ctx: ctx, id: id, ttl: rec.TTL, at: rec.Expires - rec.TTL/2}
	}
	if ao.Every <= 0 || ao.Hash != nil {
		return fs.appendPiece(ctx, id, rec, body, ao)
	}
	for {
		seg := &io.LimitedReader{R: body, N: ao.Every}
		st, err := fs.appendPiece(ctx, id, rec, seg, ao)
		if err != nil || seg.N > 0 {
			return st, err // failed, or the body ended within the segment
		}
		// The segment is full: one byte more says whether the body
		// goes on.
		var b [1]byte
		n, rerr := body.Read(b[:])
		for n == 0 && rerr == nil {
			n, rerr = body.Read(b[:])
		}
		if n == 0 {
			if rerr == io.EOF {
				return st, nil
			}
			return st, rerr
		}
		body = io.MultiReader(bytes.NewReader(b[:n]), body)
		// The next segment goes on where this one ended, and nowhere
		// else: another request may have appended meanwhile (tusd
		// locks an upload on one node only), and the rest of this body
		// after its bytes would be stored where it does not belong.
		// commitAppend holds the upload to the state loaded here, so
		// nothing can come between this check and the next commit.
		want := rec.offset() + ao.Every
		if err := fs.db.View(ctx, func(tx kv.Txn) error {
			var err error
			rec, err = fs.loadStaged(tx, id)
			return err
		}); err != nil {
			return st, err
		}
		if rec.offset() != want {
			return rec.public(id), fmt.Errorf("%w: another request appended to the upload meanwhile; it is at %d, not %d", ErrUploadOffset, rec.offset(), want)
		}
	}
}

// appendPiece stores what body yields as the bytes of upload id (rec)
// from its offset on and commits them: one append, or one segment of it
// (AppendOptions.Every).
func (fs *FS) appendPiece(ctx context.Context, id uint64, rec stagedRec, body io.Reader, ao AppendOptions) (Staged, error) {
	if ao.Hash != nil {
		body = io.TeeReader(body, ao.Hash)
	}
	var crc *crcWriter
	if rec.CRC != nil {
		crc = &crcWriter{sum: *rec.CRC}
		body = io.TeeReader(body, crc)
	}
	src := body
	if len(rec.Tail) > 0 {
		tail := fs.reads.NewReader(ctx, fs.chunks, rec.Tail)
		defer tail.Close()
		src = io.MultiReader(tail, body)
	}
	// The stream starts at the end of the sealed chunks.
	refs, size, err := fs.writer.Write(ctx, src, rec.Length-rec.Sealed)
	defer fs.pins.unpinRefs(refs)
	if err == nil && ao.Hash != nil && !bytes.Equal(ao.Hash.Sum(nil), ao.Sum) {
		err = fmt.Errorf("%w: the %d bytes sent do not match their checksum", ErrChecksumMismatch, size-(rec.offset()-rec.Sealed))
	}
	if err != nil {
		fs.forget(refs)
		if errors.Is(err, chunk.ErrTooLarge) {
			return rec.public(id), fmt.Errorf("%w: more than the %d bytes declared", ErrFileTooLarge, rec.Length)
		}
		return rec.public(id), err
	}
	if len(refs) == 0 {
		return rec.public(id), nil // nothing before, nothing now
	}
	var sum *uint32
	if crc != nil {
		sum = &crc.sum
	}
	done, err := fs.commitAppend(ctx, id, rec, refs, sum)
	if err != nil {
		fs.forget(refs[done:])
		return rec.public(id), fs.endOrphan(ctx, id, err)
	}
	fs.dropTail(ctx, rec.Tail)
	return fs.StagedInfo(ctx, id)
}

// orphanError is the error of a method that found upload id's root
// deleted or gone: the upload can never become a file, and the method
// ends it (endOrphan) rather than leave its chunks and reservation held
// until the sweep. It wraps ErrRootDeleted or ErrNotExist.
type orphanError struct{ err error }

// Error is the wrapped error's text.
func (e orphanError) Error() string { return e.err.Error() }

// Unwrap makes errors.Is(err, ErrRootDeleted) (or ErrNotExist) true.
func (e orphanError) Unwrap() error { return e.err }

// stagedRootLive checks, in tx, that the root of upload id (rec) is
// live: an orphanError otherwise. A root is never undeleted, so nothing
// could append to or finish an upload into a deleted one; before, Append
// stored bytes into it until the sweep ended it.
func stagedRootLive(tx kv.Txn, id uint64, rec stagedRec) error {
	_, err := loadRoot(tx, rec.Root)
	if errors.Is(err, ErrRootDeleted) || errors.Is(err, ErrNotExist) {
		return orphanError{fmt.Errorf("staged upload %d: %w", id, err)}
	}
	return err
}

// endOrphan ends upload id when err says its root is deleted or gone
// (orphanError), giving back its chunks and reservation at once, and
// returns err. A failure to end it is logged: the sweep ends it later.
func (fs *FS) endOrphan(ctx context.Context, id uint64, err error) error {
	var o orphanError
	if !errors.As(err, &o) {
		return err
	}
	if terr := fs.terminate(context.WithoutCancel(ctx), id, false); terr != nil && !errors.Is(terr, ErrNotExist) {
		fs.log.Warn("vfs: could not end a staged upload whose root is deleted; the sweep ends it", "upload", id, "err", terr)
	}
	return err
}

// keepStaged is an append's body that keeps its upload alive while bytes
// arrive: once half the upload's lifetime is gone it moves the expiry a
// TTL ahead, as the append's commit does. An append commits at its end,
// and one that lasted past the expiry its upload had when it began (a
// slow link's PATCH of a large file) was ended under it by the sweep: its
// commit found the upload gone and every byte it brought was dropped.
type keepStaged struct {
	r   io.Reader
	fs  *FS
	ctx context.Context
	id  uint64
	ttl int64
	// at is when to move the expiry next.
	at int64
}

func (k *keepStaged) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	if now := k.fs.nowNs(); now >= k.at {
		k.renew()
	}
	return n, err
}

// renew moves the expiry. An upload gone meanwhile (terminated, or
// expired after a stall) is not renewed again, and the commit fails; any
// other failure is logged and tried again an eighth of the TTL later.
func (k *keepStaged) renew() {
	var expires int64
	err := k.fs.update(k.ctx, func(tx kv.Txn) error {
		rec, err := k.fs.loadStaged(tx, k.id)
		if err != nil {
			return err
		}
		rec.Expires = k.fs.nowNs() + rec.TTL
		expires = rec.Expires
		return put(tx, stagedKey(k.id), rec)
	})
	switch {
	case err == nil:
		k.at = expires - k.ttl/2
	case errors.Is(err, ErrNotExist):
		k.at = math.MaxInt64
	default:
		k.at = k.fs.nowNs() + k.ttl/8
		if k.ctx.Err() == nil {
			k.fs.log.Warn("vfs: could not move the expiry of a staged upload during an append", "upload", k.id, "err", err)
		}
	}
}

// commitAppend hands refs, the chunks cut from the old tail on, to upload
// id: all but the last go into parts, refBatch a transaction, each
// transaction leaving a consistent upload (what it sealed counts in the
// offset), and the last becomes the tail. The first transaction lets go
// of the old tail, whose bytes the first of refs begin with. crc is the
// CRC of the upload's bytes with those appended (nil: unknown); a
// transaction before the last leaves the upload's unknown, since the
// offset it leaves is between the two. It returns how many of refs the
// upload holds a count on, on failure too.
func (fs *FS) commitAppend(ctx context.Context, id uint64, was stagedRec, refs []chunk.Ref, crc *uint32) (int, error) {
	sealed, tail := refs[:len(refs)-1], refs[len(refs)-1:]
	wantSealed, wantTail := was.Sealed, was.Tail
	done := 0
	for first := true; first || done < len(sealed); first = false {
		batch := sealed[done:min(done+fs.refBatch, len(sealed))]
		last := done+len(batch) == len(sealed)
		fs.gcMu.RLock()
		err := fs.update(ctx, func(tx kv.Txn) error {
			rec, err := fs.loadStaged(tx, id)
			if err != nil {
				return err
			}
			// Read in the transaction, so that a DeleteRoot committed
			// meanwhile conflicts with it.
			if err := stagedRootLive(tx, id, rec); err != nil {
				return err
			}
			if rec.Sealed != wantSealed || !slicesEqual(rec.Tail, wantTail) {
				return fmt.Errorf("%w: another request appended to the upload meanwhile", ErrUploadOffset)
			}
			if first && len(rec.Tail) > 0 {
				if err := addRefs(tx, rec.Tail, -1); err != nil {
					return err
				}
				rec.Tail = nil
			}
			add := batch
			if last {
				add = refs[done:]
			}
			if err := fs.checkStored(ctx, tx, add); err != nil {
				return err
			}
			if err := addRefs(tx, add, 1); err != nil {
				return err
			}
			if len(batch) > 0 {
				if err := put(tx, stagedPartKey(id, rec.Parts), stagedPart{Chunks: batch}); err != nil {
					return err
				}
				rec.Parts++
				for _, c := range batch {
					rec.Sealed += c.Size
				}
			}
			rec.CRC = nil
			if last {
				rec.Tail = tail
				rec.Expires = fs.nowNs() + rec.TTL
				rec.CRC = crc
			}
			return put(tx, stagedKey(id), rec)
		})
		fs.gcMu.RUnlock()
		if err != nil {
			return done, err
		}
		for _, c := range batch {
			wantSealed += c.Size
		}
		wantTail = nil
		done += len(batch)
		if last {
			done = len(refs)
		}
		fs.between(OpWrite)
	}
	return done, nil
}

// dropTail removes at once the old tail an append cut again, unless
// something still holds it (the new chunks, another file, a pin), through
// the collector's own check (removeUnreferenced). Left to the next
// collection, every append left a chunk of up to 4 MiB behind, whatever
// it brought: a client sending one byte a PATCH made the store grow by
// about a MiB a request, past its quota, until the hourly collection. A
// failure is logged only; that collection removes it then.
func (fs *FS) dropTail(ctx context.Context, tail []chunk.Ref) {
	if len(tail) == 0 {
		return
	}
	ids := make([]chunk.ID, len(tail))
	for i, c := range tail {
		ids[i] = c.ID
	}
	if _, err := fs.removeUnreferenced(context.WithoutCancel(ctx), ids, false, true); err != nil {
		fs.log.Warn("vfs: could not remove the tail a staged upload replaced; the next collection does", "err", err)
	}
}

func slicesEqual(a, b []chunk.Ref) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Finish makes upload id, all of whose bytes are stored (ErrUploadOffset
// otherwise), the file it was staged as, in one transaction that checks
// again what WriteFile checks at its commit (opts, the caller's at this
// moment) and gives the reservation back. The chunks pass to the
// revision as they are. Bytes of the length that were not reserved
// (fair.go) are checked against the quotas as a write of that many,
// again after freeRoom when they do not fit: ErrQuotaExceeded otherwise.
// Only a failure leaves the upload staged, but for ErrRootDeleted (or
// ErrNotExist for a root gone), which ends it as Append does. An
// upload finished already, less than finishedGrace ago, is not made
// again: Finish returns its file (as it is now) and nil, so that the two
// requests that raced to finish it both learn it succeeded.
func (fs *FS) Finish(ctx context.Context, id uint64, opts WriteOptions) (Node, error) {
	var rec stagedRec
	n, err := fs.finish(ctx, id, opts, &rec)
	if errors.Is(err, ErrQuotaExceeded) && rec.Unreserved > 0 && fs.freeRoom(ctx, rec.Root, limitsOf(opts)) > 0 {
		n, err = fs.finish(ctx, id, opts, &rec)
	}
	if err == nil && rec.Done != 0 {
		return n, nil // made by the other Finish, which told the observer
	}
	err = fs.endOrphan(ctx, id, err)
	fs.done(OpWrite, err, Event{RootID: rec.Root, NodeID: n.ID, ParentID: rec.Parent, Name: rec.Name, Size: n.Size})
	return n, err
}

// finished returns, in tx, the file that upload rec, finished already,
// became: as it is now, or only its id once it is gone.
func (fs *FS) finished(tx kv.Txn, rec stagedRec) Node {
	n, _, err := loadNode(tx, rec.Done)
	if err != nil {
		return Node{ID: rec.Done}
	}
	return n.public(fs.nowNs())
}

func (fs *FS) finish(ctx context.Context, id uint64, opts WriteOptions, out *stagedRec) (Node, error) {
	newID, err := fs.db.NextID(ctx, "node")
	if err != nil {
		return Node{}, err
	}
	lim := limitsOf(opts)
	var node nodeRec
	var path string
	var again Node
	err = fs.update(ctx, func(tx kv.Txn) error {
		st, err := fs.loadStaged(tx, id)
		*out = st
		if err != nil && st.Done != 0 && st.Expires > fs.nowNs() {
			again = fs.finished(tx, st)
			return nil
		}
		if err != nil {
			return err
		}
		if err := stagedRootLive(tx, id, st); err != nil {
			return err
		}
		if st.offset() != st.Length {
			return fmt.Errorf("%w: %d of %d bytes stored", ErrUploadOffset, st.offset(), st.Length)
		}
		if excluded(st.Name, opts.ExcludedExtensions) {
			return fmt.Errorf("%w: %q", ErrExtensionExcluded, extension(st.Name))
		}
		if opts.MaxFileSize > 0 && st.Length > opts.MaxFileSize {
			return fmt.Errorf("%w: %d bytes, at most %d", ErrFileTooLarge, st.Length, opts.MaxFileSize)
		}
		refs := make([]chunk.Ref, 0, st.Parts*uint64(fs.refBatch)+1)
		for p := range st.Parts {
			var part stagedPart
			if err := get(tx, stagedPartKey(id, p), &part, fmt.Errorf("%w: part %d of staged upload %d is missing", ErrBusy, p, id)); err != nil {
				return err
			}
			refs = append(refs, part.Chunks...)
			if err := tx.Delete(stagedPartKey(id, p)); err != nil {
				return err
			}
		}
		refs = append(refs, st.Tail...)
		now := fs.nowNs()
		if !opts.Modified.IsZero() {
			now = opts.Modified.UnixNano()
		}
		old, err := fs.checkWrite(tx, st.Root, st.Parent, st.Name, opts, fs.nowNs())
		if err != nil {
			return err
		}
		size := st.Length
		// The length not reserved grows the root: checked.
		d := usageRec{Reserved: -st.reserved()}
		if old != nil {
			node = *old
			d.Revisions++
			d.RevisionSize += node.Size
			d.HeadSize += size - node.Size
		} else {
			node = nodeRec{ID: newID, Root: st.Root, Parent: st.Parent, Name: st.Name, Created: now}
			d.Files++
			d.HeadSize += size
		}
		if err := fs.addUsage(ctx, tx, st.Root, d, lim); err != nil {
			return err
		}
		if st.Owned {
			if err := addOwned(tx, st.Owner, st.Root, -st.reserved()); err != nil {
				return err
			}
			if err := addAnnounced(tx, st.Owner, st.Root, -st.Unreserved); err != nil {
				return err
			}
		}
		if st.Counted {
			if err := addCount(tx, ownerStagedKey(st.Owner), -1); err != nil {
				return err
			}
		}
		revID, err := fs.db.NextID(ctx, "revision")
		if err != nil {
			return err
		}
		node.Modified, node.Size, node.Rev = now, size, revID
		rev := revRec{ID: revID, File: node.ID, Size: size, Created: fs.nowNs(), Chunks: refs, CRC: st.CRC}
		if err := put(tx, revKey(node.ID, revID), rev); err != nil {
			return err
		}
		if err := saveNode(tx, node, locRec{Root: st.Root, Parent: st.Parent, Name: st.Name}); err != nil {
			return err
		}
		if err := setModified(tx, node, old); err != nil {
			return err
		}
		if path, err = pathOf(tx, node); err != nil {
			return err
		}
		// The record stays as the file's: no chunks, no reservation.
		fin := stagedRec{
			Root: st.Root, Parent: st.Parent, Name: st.Name, Length: st.Length, Owner: st.Owner,
			Created: st.Created, Expires: fs.nowNs() + int64(finishedGrace), Done: node.ID,
		}
		if err := put(tx, stagedKey(id), fin); err != nil {
			return err
		}
		return fs.journal(ctx, tx, OpWrite, opts.Actor, Event{RootID: st.Root, NodeID: node.ID, ParentID: st.Parent, Name: st.Name, Size: size, Created: old == nil})
	})
	if err != nil {
		if errors.Is(err, kv.ErrTxnTooBig) {
			return Node{}, fmt.Errorf("%w: the upload's chunks are more than one commit takes", ErrFileTooLarge)
		}
		return Node{}, err
	}
	if out.Done != 0 {
		return again, nil
	}
	fs.m.bytesWritten.Add(float64(node.Size))
	n := node.public(fs.nowNs())
	n.Path = path
	return n, nil
}

// Terminate ends upload id without a file: its chunks' counts and its
// reservation are given back. An expired upload can be terminated too.
func (fs *FS) Terminate(ctx context.Context, id uint64) error {
	return fs.terminate(ctx, id, false)
}

// terminate ends upload id; with expired, only once it has expired (the
// sweep's check, made in the transaction that ends it, so an append that
// moved the expiry meanwhile wins).
func (fs *FS) terminate(ctx context.Context, id uint64, expired bool) error {
	in, err := fs.newIntent(ctx)
	if err != nil {
		return err
	}
	err = fs.update(ctx, func(tx kv.Txn) error {
		var rec stagedRec
		if err := get(tx, stagedKey(id), &rec, fmt.Errorf("%w: staged upload %d", ErrNotExist, id)); err != nil {
			return err
		}
		if expired && rec.Expires > fs.nowNs() {
			return errNotExpired
		}
		if rec.Done != 0 {
			// A finished upload's record: its chunks and reservation
			// went to the file.
			if !expired {
				return fmt.Errorf("%w: staged upload %d finished", ErrNotExist, id)
			}
			return tx.Delete(stagedKey(id))
		}
		// The counts pass to an intent in this transaction and are
		// released after it: a crash between leaves the intent to Open.
		for p := range rec.Parts {
			var part stagedPart
			if err := get(tx, stagedPartKey(id, p), &part, nil); err != nil {
				return err
			}
			if err := fs.putIntent(tx, intentKey(in.id, p), intentRec{Chunks: chunkIDs(part.Chunks)}); err != nil {
				return err
			}
			if err := tx.Delete(stagedPartKey(id, p)); err != nil {
				return err
			}
		}
		if len(rec.Tail) > 0 {
			if err := fs.putIntent(tx, intentKey(in.id, rec.Parts), intentRec{Chunks: chunkIDs(rec.Tail)}); err != nil {
				return err
			}
		}
		if rec.Owned {
			if err := addOwned(tx, rec.Owner, rec.Root, -rec.reserved()); err != nil {
				return err
			}
			if err := addAnnounced(tx, rec.Owner, rec.Root, -rec.Unreserved); err != nil {
				return err
			}
		}
		if rec.Counted {
			if err := addCount(tx, ownerStagedKey(rec.Owner), -1); err != nil {
				return err
			}
		}
		// A root gone took its accounting with it, as did one purged
		// meanwhile (addUsage records nothing of it).
		if _, err := tx.Get(rootKey(rec.Root)); err == nil {
			if err := fs.addUsage(ctx, tx, rec.Root, usageRec{Reserved: -rec.reserved()}, limits{}); err != nil {
				return err
			}
		} else if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		return tx.Delete(stagedKey(id))
	})
	if err != nil {
		return err
	}
	fs.releaseFailed(ctx, in)
	return nil
}

// errNotExpired is an upload the sweep found expired that an append
// renewed before the sweep ended it.
var errNotExpired = errors.New("vfs: staged upload renewed")

// ExpireStaged terminates every staged upload whose expiry has passed,
// and every live one whose owner, as Options.Holder says, may no longer
// write its target, and returns how many it ended. The daemon runs it
// periodically; until it does, an expired upload is ErrNotExist to every
// other method, but its chunks and reservation are still held. An upload it cannot end (a
// record that does not read) does not keep it from the others: it goes
// on, and returns their errors joined (at most maxSweepErrors of them)
// with the count of those it ended.
func (fs *FS) ExpireStaged(ctx context.Context) (int, error) {
	var ids, finished []uint64
	var errs []error
	failed := 0
	fail := func(err error) {
		if failed++; failed <= maxSweepErrors {
			errs = append(errs, err)
		}
	}
	now := fs.nowNs()
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		ids, finished, errs, failed = ids[:0], finished[:0], errs[:0], 0
		return tx.Scan([]byte(pStaged), nil, func(k, v []byte) error {
			var rec stagedRec
			if err := cbor.Unmarshal(v, &rec); err != nil {
				fail(fmt.Errorf("staged upload %d: %w", stagedKeyID(k), err))
				return nil
			}
			if rec.Expires <= now && rec.Done != 0 {
				finished = append(finished, stagedKeyID(k))
			} else if rec.Expires <= now {
				ids = append(ids, stagedKeyID(k))
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	for _, id := range finished {
		// Records of finished uploads (Done): not counted as ended.
		if err := fs.terminate(ctx, id, true); err != nil && !errors.Is(err, errNotExpired) && !errors.Is(err, ErrNotExist) {
			if ctx.Err() != nil {
				return 0, err
			}
			fail(fmt.Errorf("finished upload %d: %w", id, err))
		}
	}
	n := 0
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		err := fs.terminate(ctx, id, true)
		switch {
		case err == nil:
			n++
		case errors.Is(err, errNotExpired), errors.Is(err, ErrNotExist):
		case ctx.Err() != nil:
			return n, err
		default:
			fail(fmt.Errorf("staged upload %d: %w", id, err))
		}
	}
	fs.forgetRoomFreed(now)
	m, err := fs.releaseUnheld(ctx, func(kv.Txn, stagedRec) (bool, error) { return true, nil })
	n += m
	if err != nil {
		if ctx.Err() != nil {
			return n, err
		}
		fail(err)
	}
	if failed > maxSweepErrors {
		errs = append(errs, fmt.Errorf("and %d more uploads that could not be ended", failed-maxSweepErrors))
	}
	return n, errors.Join(errs...)
}

// stagedTotals counts the staged uploads not finished, and sums what
// they reserve.
func (fs *FS) stagedTotals(ctx context.Context) (n int, reserved int64, err error) {
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		n, reserved = 0, 0
		return tx.Scan([]byte(pStaged), nil, func(_, v []byte) error {
			var rec stagedRec
			if cbor.Unmarshal(v, &rec) != nil {
				return nil // ExpireStaged's to report
			}
			if rec.Done == 0 {
				n++
				reserved += rec.reserved()
			}
			return ctx.Err()
		})
	})
	return n, reserved, err
}

// defaultStagedBatch is how many upload records EachStaged reads in one
// transaction.
const defaultStagedBatch = 256

// EachStaged calls fn with every staged upload in progress, in id order:
// those not finished, not expired, and into a live root (one into a
// deleted root holds nothing against any quota and is ended at its next
// append or by the sweep). It reads 256 records a transaction (defaultStagedBatch) and
// calls fn outside any, so that a listing of many uploads holds neither
// a transaction open for its length nor more than a batch in memory. A
// record that does not read is skipped (ExpireStaged reports it). An
// error from fn ends it with that error; kv.ErrStop ends it with nil.
func (fs *FS) EachStaged(ctx context.Context, fn func(Staged) error) error {
	next := uint64(0)
	batch := make([]Staged, 0, fs.stagedBatch)
	for {
		now := fs.nowNs()
		more := false
		err := fs.db.View(ctx, func(tx kv.Txn) error {
			batch, more = batch[:0], false
			live := map[uint64]bool{}
			return tx.Scan([]byte(pStaged), stagedKey(next), func(k, v []byte) error {
				if len(batch) == fs.stagedBatch {
					more = true
					return kv.ErrStop
				}
				id := stagedKeyID(k)
				next = id + 1
				var rec stagedRec
				if cbor.Unmarshal(v, &rec) != nil || rec.Done != 0 || rec.Expires <= now {
					return nil
				}
				ok, seen := live[rec.Root]
				if !seen {
					_, err := loadRoot(tx, rec.Root)
					if err != nil && !errors.Is(err, ErrRootDeleted) && !errors.Is(err, ErrNotExist) {
						return err
					}
					ok = err == nil
					live[rec.Root] = ok
				}
				if ok {
					batch = append(batch, rec.public(id))
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		for _, st := range batch {
			if err := fn(st); errors.Is(err, kv.ErrStop) {
				return nil
			} else if err != nil {
				return err
			}
		}
		if !more {
			return ctx.Err()
		}
	}
}

// StagedHolder decides which staged uploads may keep their reservation.
// A reservation holds room no one else can use, and only the upload's
// owner can end it: once the owner may no longer write to its target
// (removed from a share or its group, deactivated, deleted), nothing
// else would give the room back before the upload expired, and a PATCH
// a day would have kept it for good.
type StagedHolder interface {
	// HoldsStaged reports whether the owner of upload s may still write
	// to s.Root. An error leaves the upload as it is.
	HoldsStaged(ctx context.Context, s Staged) (bool, error)
}

// releaseUnheld terminates the live staged uploads that match selects
// (in the transaction that lists them) and whose owner, as the holder
// says, may no longer write their target, and returns how many it ended.
// Errors are joined, at most maxSweepErrors of them.
func (fs *FS) releaseUnheld(ctx context.Context, match func(kv.Txn, stagedRec) (bool, error)) (int, error) {
	if fs.holder == nil {
		return 0, nil
	}
	var ups []Staged
	now := fs.nowNs()
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		ups = ups[:0]
		return tx.Scan([]byte(pStaged), nil, func(k, v []byte) error {
			var rec stagedRec
			if err := cbor.Unmarshal(v, &rec); err != nil || rec.Done != 0 || rec.Expires <= now {
				return nil // ExpireStaged's to end or report
			}
			ok, err := match(tx, rec)
			if ok {
				ups = append(ups, rec.public(stagedKeyID(k)))
			}
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, st := range ups {
		held, err := fs.holder.HoldsStaged(ctx, st)
		if err == nil && !held {
			if err = fs.terminate(ctx, st.ID, false); err == nil {
				n++
				fs.log.Info("vfs: ended a staged upload whose owner may no longer write its root", "upload", st.ID, "root", st.Root, "owner", st.Owner, "length", st.Length)
			} else if errors.Is(err, ErrNotExist) {
				err = nil
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return n, err
			}
			if len(errs) < maxSweepErrors {
				errs = append(errs, fmt.Errorf("staged upload %d: %w", st.ID, err))
			}
		}
	}
	return n, errors.Join(errs...)
}

// freeRoomTimeout bounds freeRoom, which a refused request waits for.
const freeRoomTimeout = 30 * time.Second

// freeRoomEvery is how often freeRoom may run for one root. It reads
// every staged upload of the store and asks the holder about those under
// root's quotas, and each refused write called it twice: a client at its
// quota, sending refused writes in a loop, made the server scan them all
// twice a request.
const freeRoomEvery = 10 * time.Second

// forgetRoomFreed drops the times of the roots whose freeRoomEvery has
// passed by now: such an entry throttles nothing, and without the sweep
// dropping them the map kept one for every root ever refused a write,
// deleted roots included, for the life of the process.
func (fs *FS) forgetRoomFreed(now int64) {
	fs.roomFreed.Range(func(k, v any) bool {
		if now-v.(int64) >= int64(freeRoomEvery) {
			fs.roomFreed.CompareAndDelete(k, v)
		}
		return true
	})
}

// freeRoom ends the staged uploads counted against the quotas of lim, the
// limits that refused a write to root (root's own uploads, and those into
// roots that count into a tally lim bounds), whose owner may no longer
// write their target, and returns how many it ended. Only the bounded
// tallies: every root shares the tallies of its ancestor organizations,
// and a refusal under one organization's quota is no reason to ask about
// the uploads of every other organization under the same parent. A write refused for want of room calls it, so that such an
// upload holds room only until someone needs it, or freeRoomEvery after
// the last time it ran for root.
func (fs *FS) freeRoom(ctx context.Context, root uint64, lim limits) int {
	if fs.holder == nil {
		return 0
	}
	now := fs.nowNs()
	last, loaded := fs.roomFreed.LoadOrStore(root, now)
	if loaded {
		if now-last.(int64) < int64(freeRoomEvery) || !fs.roomFreed.CompareAndSwap(root, last, now) {
			return 0 // ran lately, or runs now in another request
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), freeRoomTimeout)
	defer cancel()
	var tallies []uint64
	for _, q := range lim.quotas {
		if q.Bytes > 0 {
			tallies = append(tallies, q.Tally)
		}
	}
	n, err := fs.releaseUnheld(ctx, func(tx kv.Txn, rec stagedRec) (bool, error) {
		if rec.Root == root {
			return true, nil
		}
		if len(tallies) == 0 {
			return false, nil
		}
		var r rootRec
		if err := get(tx, rootKey(rec.Root), &r, kv.ErrNotFound); err != nil {
			return false, nil
		}
		for _, t := range r.Tallies {
			if slices.Contains(tallies, t) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		fs.log.Warn("vfs: could not end every staged upload whose owner may no longer write its root", "root", root, "ended", n, "err", err)
	}
	return n
}

// maxSweepErrors bounds the errors ExpireStaged returns, so that a store
// with many damaged uploads logs a line, not a page.
const maxSweepErrors = 5

// stagedRefs adds to want a count for every chunk the staged uploads
// hold (their parts and tails), for Fsck.
func stagedRefs(tx kv.Txn, want map[chunk.ID]int64) error {
	err := tx.Scan([]byte(pPart), nil, func(k, v []byte) error {
		var p stagedPart
		if err := cbor.Unmarshal(v, &p); err != nil {
			return err
		}
		for _, c := range p.Chunks {
			want[c.ID]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tx.Scan([]byte(pStaged), nil, func(k, v []byte) error {
		var rec stagedRec
		if err := cbor.Unmarshal(v, &rec); err != nil {
			return err
		}
		for _, c := range rec.Tail {
			want[c.ID]++
		}
		return nil
	})
}

// crcWriter carries a CRC-32 (IEEE) on over what is written to it.
type crcWriter struct{ sum uint32 }

func (c *crcWriter) Write(p []byte) (int, error) {
	c.sum = crc32.Update(c.sum, crc32.IEEETable, p)
	return len(p), nil
}
