package rest

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	tusd "github.com/tus/tusd/v2/pkg/handler"
	"github.com/tus/tusd/v2/pkg/memorylocker"
	expslog "golang.org/x/exp/slog"

	"berth/account"
	"berth/httpserve"
	"berth/share"
	"berth/vfs"
)

// Resumable uploads: the tus 1.0 protocol (https://tus.io/protocols/
// resumable-upload) with its creation, expiration, termination and
// checksum extensions, served by the tus project's own Go server library
// (tusd's unrouted handler) over a store of vfs staged uploads (see
// vfs/staged.go). One endpoint, tusBase, creates uploads; its target is
// in Upload-Metadata (root_id, folder_id, filename), as tus clients send
// a file's name there. Each upload is then at tusBase + its id.
//
// berth answers, through the error table, everything it decides itself
// before tusd sees the request: the token, the caller's access (share),
// the policy and the quota checked against the declared Upload-Length,
// the upload's owner, Tus-Resumable, the offset and the checksum. What
// tusd finds itself (Content-Type of a PATCH, a piece past the length,
// races between two requests on one upload, a broken body) it writes as
// text/plain; tusWriter answers those through the error table too.

// tusBase is the creation endpoint and the prefix of every upload's URL.
const tusBase = "/api/2/tus/"

// tusEndpoint is the creation endpoint without its slash, which clients
// are as often configured with (tusd's own server serves both).
const tusEndpoint = "/api/2/tus"

// maxTusMetadata bounds the Upload-Metadata kept with an upload (and
// answered to every HEAD): a name, two ids and what clients add (a type,
// a modification time) take some hundred bytes.
const maxTusMetadata = 4 << 10

// DefaultTusExpiry is how long a tus upload lives without a PATCH when
// Options.TusExpiry is 0.
const DefaultTusExpiry = 24 * time.Hour

// DefaultTusCommitEvery is how many bytes of a PATCH are committed at a
// time as they arrive when Options.TusCommitEvery is 0. tus-js-client
// sends a whole file as one PATCH: committed at its end alone, a crash of
// berth at 9 GiB of 10 lost all of them. Each commit cuts the last chunk
// again with what follows (reading up to 4 MiB back), so segments much
// smaller cost reads; a crash loses at most this much.
const DefaultTusCommitEvery = 64 << 20

// DefaultTusMaxUploads is how many resumable uploads one person may have
// in progress at once when Options.TusMaxUploads is 0: far more than a
// client runs in parallel (tus-js-client and Uppy run a few), while each
// upload left unsent stays for TusExpiry with up to 4 KiB of metadata.
const DefaultTusMaxUploads = 1000

// tusChecksums are the algorithms of Upload-Checksum (sha1 is the one tus
// requires).
var tusChecksums = map[string]func() hash.Hash{
	"sha1": sha1.New, "md5": md5.New, "sha256": sha256.New, "sha512": sha512.New,
}

const tusAlgorithms = "sha1,md5,sha256,sha512"

// errTusVersion is a request of another tus version than 1.0.0, or none
// (412, as tus says).
var errTusVersion = errors.New("tus: unsupported protocol version")

// errTusTooLarge is a tus piece that runs past the upload's declared
// length (413, as tus says), which tusd finds.
var errTusTooLarge = errors.New("tus: piece past Upload-Length")

// tusKey finds a request's tusRequest in its context, which tusd hands
// on to the store.
type tusKey struct{}

// tusRequest is what berth decided about a request before tusd serves
// it: the upload, the caller's write options, the checksum of a PATCH,
// and the writer the store sets Upload-Expires on.
type tusRequest struct {
	staged vfs.Staged
	opts   vfs.WriteOptions
	check  vfs.AppendOptions
	w      http.ResponseWriter
	// overrun is set once the body brought more than the upload has
	// left (tusBody).
	overrun atomic.Bool
}

func tusRequestOf(ctx context.Context) *tusRequest {
	q, _ := ctx.Value(tusKey{}).(*tusRequest)
	return q
}

// tusRoutes registers the tus endpoint and the upload URLs.
func (s *server) tusRoutes() {
	store := &tusStore{s: s}
	composer := tusd.NewStoreComposer()
	composer.UseCore(store)
	composer.UseTerminater(store)
	// A PATCH that finds another still running on its upload (a client
	// resuming before the server noticed its first connection drop) asks
	// that one to stop, and goes on once it has.
	composer.UseLocker(memorylocker.New())
	h, err := tusd.NewUnroutedHandler(tusd.Config{
		StoreComposer:        composer,
		BasePath:             tusBasePath(s.opts.PublicURL),
		DisableDownload:      true,
		DisableConcatenation: true,
		Cors:                 &tusd.CorsConfig{Disable: true},
		// tusd logs every request through x/exp/slog; berth's request
		// log and error table already tell what it would.
		Logger: expslog.New(expslog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic("rest: tus handler: " + err.Error()) // the configuration is constant
	}
	s.tus = h
	s.registered("OPTIONS "+tusBase+"{$}", true)
	s.mux.HandleFunc("OPTIONS "+tusBase+"{$}", tusOptions)
	s.handleTus("POST "+tusBase+"{$}", s.tusCreate)
	// The endpoint without its slash is the same endpoint. The mux
	// answered it 307 to the slash, which tus-js-client under Node,
	// tus-java-client and curl without -L do not follow for a POST:
	// their uploads failed before they began.
	s.registered("OPTIONS "+tusEndpoint, true)
	s.mux.HandleFunc("OPTIONS "+tusEndpoint, tusOptions)
	s.handleTus("POST "+tusEndpoint, s.tusCreate)
	s.handleTus("HEAD "+tusBase+"{upload_id}", s.tusHead)
	s.handleTus("PATCH "+tusBase+"{upload_id}", s.tusPatch)
	s.handleTus("DELETE "+tusBase+"{upload_id}", s.tusDelete)
	// berth's own listings (tuslist.go): plain JSON routes, no tus
	// headers asked.
	s.handle("GET "+tusBase+"{$}", s.authed(s.listTusUploads))
	s.handle("GET /api/2/organization/{org}/uploads", s.authed(s.listOrganizationUploads))
}

// tusBasePath is tusd's BasePath, from which it makes an upload's
// Location: under public, the URL clients reach berth at, when it is set.
// Without it tusd takes the scheme and host of the request, which behind
// a reverse proxy that does not pass them on are the proxy's way in
// (http://127.0.0.1:8443/...), where no client can go on; share links
// use public_url the same way.
func tusBasePath(public string) string {
	if public == "" {
		return tusBase
	}
	return strings.TrimRight(public, "/") + tusBase
}

// handleTus registers a tus route: h runs for an authenticated caller
// and returns an error only before it hands the request to tusd.
func (s *server) handleTus(pattern string, h func(http.ResponseWriter, *http.Request) error) {
	s.registered(pattern, false)
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Tus-Resumable", "1.0.0")
		r, err := s.authenticate(r)
		if err == nil && r.Method != http.MethodHead && r.Header.Get("Tus-Resumable") != "1.0.0" {
			w.Header().Set("Tus-Version", "1.0.0")
			err = Describe(errTusVersion, "send Tus-Resumable: 1.0.0; this server speaks tus 1.0.0")
		}
		if err == nil && r.Header.Get("X-HTTP-Method-Override") != "" {
			// tusd's middleware would serve a POST as the method this
			// names after berth routed it as a creation: OPTIONS (or
			// DELETE) answered 200 without a Location, and the staged
			// upload held its length against the quota until it
			// expired.
			err = Describe(ErrInvalidRequest, "X-HTTP-Method-Override is not supported: send the method itself")
		}
		if err == nil {
			err = h(w, r)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	}))
}

// tusOptions answers tus's discovery: no token needed, nothing of
// anyone's behind it (a policy's max_file_size is the caller's, so it
// is not in Tus-Max-Size).
func tusOptions(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Tus-Resumable", "1.0.0")
	h.Set("Tus-Version", "1.0.0")
	h.Set("Tus-Extension", "creation,creation-with-upload,expiration,termination,checksum")
	h.Set("Tus-Checksum-Algorithm", tusAlgorithms)
	// tus asks for the hard limit where there is one: a creation past
	// it is refused (409) whoever sends it, before a byte is stored.
	h.Set("Tus-Max-Size", strconv.FormatInt(vfs.MaxStagedLength, 10))
	w.WriteHeader(http.StatusNoContent)
}

// tusCreate checks the target, the policy and the quota against the
// declared length, stages the upload and lets tusd answer (and take a
// first piece sent with the POST).
func (s *server) tusCreate(w http.ResponseWriter, r *http.Request) error {
	if r.Header.Get("Upload-Defer-Length") != "" || r.Header.Get("Upload-Concat") != "" {
		return Describe(ErrInvalidRequest, "Upload-Defer-Length and Upload-Concat are not supported: send Upload-Length")
	}
	length, err := strconv.ParseInt(r.Header.Get("Upload-Length"), 10, 64)
	if err != nil || length < 0 {
		return Describe(ErrInvalidRequest, "Upload-Length: the file's size in bytes is required")
	}
	if len(r.Header.Get("Upload-Metadata")) > maxTusMetadata {
		return Describe(ErrInvalidRequest, "Upload-Metadata is longer than %d bytes", maxTusMetadata)
	}
	meta := tusd.ParseMetadataHeader(r.Header.Get("Upload-Metadata"))
	root, ok := parseID(meta["root_id"])
	if !ok {
		return Describe(ErrInvalidRequest, "Upload-Metadata: root_id, the id of the root to upload to, is required")
	}
	name := meta["filename"]
	if name == "" {
		name = meta["name"]
	}
	if name == "" {
		return Describe(vfs.ErrInvalidName, "Upload-Metadata: filename, the name of the file, is required")
	}
	a, err := s.tusAccess(r, root)
	if err != nil {
		return err
	}
	// The piece sent with the creation is checked as a PATCH's is.
	check, err := tusChecksum(r.Header.Get("Upload-Checksum"))
	if err != nil {
		return err
	}
	check.Every = s.tusEvery(r, check)
	folder := a.root.FolderID
	if v, ok := meta["folder_id"]; ok && v != "0" {
		if folder, ok = parseID(v); !ok {
			return Describe(ErrNotFound, "no such folder")
		}
	}
	if n, err := s.fs.Stat(r.Context(), root, folder); err != nil || !n.Dir || n.Deleted {
		return Describe(ErrNotFound, "no such folder")
	}
	opts, err := s.uploadOptions(r.Context(), r, a, folder, name)
	if err != nil {
		return nameError(false, err)
	}
	st, err := s.fs.Stage(r.Context(), root, folder, name, vfs.StageOptions{
		Length: length, TTL: s.opts.TusExpiry, Owner: tusOwner(r), Meta: meta, MaxPerOwner: s.opts.TusMaxUploads,
	}, opts)
	if errors.Is(err, vfs.ErrTooManyStaged) {
		return Describe(err, "you have %d resumable uploads in progress, as many as berth keeps for one person: finish some, or end those you gave up on (DELETE), first", s.opts.TusMaxUploads)
	}
	if errors.Is(err, vfs.ErrExtensionExcluded) {
		return Describe(errUploadExcluded, "the organization's policy does not allow uploads of files with this extension (excluded_extensions: %s)", strings.Join(a.opts.ExcludedExtensions, ","))
	}
	if err != nil {
		return nameError(false, err)
	}
	w.Header().Set("Upload-Expires", st.Expires.Format(http.TimeFormat))
	rec := &httpserve.Recorder{ResponseWriter: w}
	s.tusServe(rec, r, &tusRequest{staged: st, opts: opts, check: check, w: w}, s.tus.PostFile)
	if rec.Status() != http.StatusCreated {
		// tusd refused after the upload was staged, or the piece sent
		// with it failed, or the client left (no answer written at
		// all): no Location went out, so nobody can go on.
		if err := s.fs.Terminate(context.WithoutCancel(r.Context()), st.ID); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			s.log.Warn("tus: could not end a refused upload; it expires", "upload", st.ID, "error", err)
		}
	}
	return nil
}

// tusHead answers the offset of one of the caller's uploads.
func (s *server) tusHead(w http.ResponseWriter, r *http.Request) error {
	st, a, err := s.tusUpload(r)
	if err == errTusNotFound {
		// Finished already, a moment ago: the client that sent the
		// last piece lost its answer (the connection broke after the
		// commit) and asks for the offset, as tus-js-client does
		// before it goes on. An offset equal to the length tells it the
		// upload is done; 404 made it create a new upload and send the
		// whole file again.
		id, _ := parseID(r.PathValue("upload_id"))
		if st, ferr := s.fs.StagedFinished(r.Context(), id); ferr == nil && st.Owner == tusOwner(r) {
			if _, err := s.tusAccess(r, st.Root); err != nil {
				return err
			}
			tusDone(w, st)
			return nil
		}
	}
	if err != nil {
		return err
	}
	if st.Offset == st.Length {
		// Every byte is stored but the file was not made: its last
		// PATCH met a refusal (a folder took the name, a lock), which
		// a client retries (tus-js-client retries a 409) by asking for
		// the offset here. An offset equal to the length tells it the
		// upload is done, and it reports success: so the file is made
		// now, or the refusal answered.
		if err := s.tusFinish(r, st, a); err != nil {
			return err
		}
		tusDone(w, st)
		return nil
	}
	w.Header().Set("Upload-Expires", st.Expires.Format(http.TimeFormat))
	s.tusServe(w, r, &tusRequest{staged: st, w: w}, s.tus.HeadFile)
	return nil
}

// tusDone answers a HEAD of upload st, whose file is made: its offset is
// its length.
func tusDone(w http.ResponseWriter, st vfs.Staged) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Upload-Offset", strconv.FormatInt(st.Length, 10))
	h.Set("Upload-Length", strconv.FormatInt(st.Length, 10))
	if len(st.Meta) > 0 {
		h.Set("Upload-Metadata", tusd.SerializeMetadataHeader(st.Meta))
	}
	w.WriteHeader(http.StatusOK)
}

// tusPatch checks the offset and the checksum of a piece and lets tusd
// store it; the last piece makes the file.
func (s *server) tusPatch(w http.ResponseWriter, r *http.Request) error {
	st, a, err := s.tusUpload(r)
	if err != nil {
		return err
	}
	offset, err := strconv.ParseInt(r.Header.Get("Upload-Offset"), 10, 64)
	if err != nil || offset < 0 {
		return Describe(ErrInvalidRequest, "Upload-Offset: the offset the piece starts at is required")
	}
	if offset != st.Offset {
		return Describe(vfs.ErrUploadOffset, "the upload is at offset %d, not %d: ask with HEAD and go on from there", st.Offset, offset)
	}
	check, err := tusChecksum(r.Header.Get("Upload-Checksum"))
	if err != nil {
		return err
	}
	check.Every = s.tusEvery(r, check)
	if st.Offset == st.Length {
		// Every byte is stored but the file was not made (its last
		// PATCH met a refusal: a folder took the name, a lock): tusd
		// would answer 204 and forget it, so try again here.
		if err := s.tusFinish(r, st, a); err != nil {
			return err
		}
		w.Header().Set("Upload-Offset", strconv.FormatInt(st.Offset, 10))
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	opts, err := s.uploadOptions(r.Context(), r, a, st.Parent, st.Name)
	if err != nil {
		return nameError(false, err)
	}
	s.tusServe(w, r, &tusRequest{staged: st, opts: opts, check: check, w: w}, s.tus.PatchFile)
	return nil
}

// tusEvery is how often the bytes of r's piece are committed as they
// arrive (vfs.AppendOptions.Every): every Options.TusCommitEvery bytes
// for a body of known length without a checksum; 0 (once, at its end)
// for a piece under Upload-Checksum, which is kept whole or not at all,
// and for a body of unknown length (chunked), which may bring more than
// the upload has left and is then refused whole (tusBody).
func (s *server) tusEvery(r *http.Request, check vfs.AppendOptions) int64 {
	if check.Hash != nil || r.ContentLength < 0 {
		return 0
	}
	return s.opts.TusCommitEvery
}

// tusFinish makes the file of upload st, all of whose bytes are stored,
// under the caller's write options at this moment.
func (s *server) tusFinish(r *http.Request, st vfs.Staged, a fsAccess) error {
	opts, err := s.uploadOptions(r.Context(), r, a, st.Parent, st.Name)
	if err != nil {
		return nameError(false, err)
	}
	if _, err := s.fs.Finish(r.Context(), st.ID, opts); err != nil {
		return nameError(false, err)
	}
	return nil
}

// tusDelete ends an upload (termination): one of the caller's own, in a
// root they may still write to, or anyone's in a root they administer
// (share.ManagesRoot). An upload reserves room under its organization's
// quota that only its creator could give back; its administrators end it
// here, without taking the creator's write access away. To anyone else
// it is not_found, as an upload that never was.
func (s *server) tusDelete(w http.ResponseWriter, r *http.Request) error {
	st, err := s.tusStaged(r)
	if err != nil {
		return err
	}
	mine := st.Owner == tusOwner(r)
	if mine {
		_, err = s.tusAccess(r, st.Root)
	}
	if !mine || err != nil {
		switch merr := s.shares.ManagesRoot(r.Context(), callerOf(r), st.Root); {
		case merr == nil:
			if !mine {
				s.log.Info("tus: an administrator ends another's upload", "upload", st.ID, "root", st.Root,
					"owner", st.Owner, "length", st.Length, "offset", st.Offset, "by", callerOf(r).Person.ID)
			}
		case !mine && errors.Is(merr, share.ErrNoRoot):
			return errTusNotFound
		case !mine:
			return merr
		default:
			return err
		}
	}
	s.tusServe(w, r, &tusRequest{staged: st, w: w}, s.tus.DelFile)
	return nil
}

// tusServe hands r to tusd's op with q in its context, through tusd's
// middleware (which sets its headers and the body's read deadlines).
func (s *server) tusServe(w http.ResponseWriter, r *http.Request, q *tusRequest, op http.HandlerFunc) {
	r = r.WithContext(context.WithValue(r.Context(), tusKey{}, q))
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &tusBody{ReadCloser: r.Body, left: q.staged.Length - q.staged.Offset, q: q}
	}
	if r.Method != http.MethodPost {
		// tusd reads the upload's id from a path with the base stripped.
		u := *r.URL
		u.Path, u.RawPath = strconv.FormatUint(q.staged.ID, 10), ""
		r.URL = &u
	}
	tw := &tusWriter{ResponseWriter: w, s: s, r: r}
	s.tus.Middleware(op).ServeHTTP(tw, r)
	tw.finish()
}

// tusdAnswers are berth's answers, by tusd's error code, to the errors
// tusd finds itself and writes as text/plain (ERR_…: message).
var tusdAnswers = map[string]error{
	tusd.ErrInvalidContentType.ErrorCode: Describe(ErrInvalidRequest, "a piece is sent as Content-Type: application/offset+octet-stream"),
	tusd.ErrInvalidOffset.ErrorCode:      Describe(ErrInvalidRequest, "Upload-Offset: the offset the piece starts at is required"),
	tusd.ErrNotImplemented.ErrorCode:     Describe(ErrInvalidRequest, "Upload-Length is sent with the creation only (Upload-Defer-Length is not supported)"),
	tusd.ErrMismatchOffset.ErrorCode:     Describe(vfs.ErrUploadOffset, "another request on this upload stored bytes meanwhile: ask with HEAD and go on from there"),
	tusd.ErrUploadInterrupted.ErrorCode:  Describe(vfs.ErrUploadOffset, "a newer request on this upload took over; what arrived before it is kept: ask with HEAD"),
	tusd.ErrSizeExceeded.ErrorCode:       errTusTooLarge,
	tusd.ErrMaxSizeExceeded.ErrorCode:    errTusTooLarge,
	tusd.ErrNotFound.ErrorCode:           Describe(ErrNotFound, "no such upload: it was finished, terminated or expired, or is not yours"),
	tusd.ErrUnsupportedVersion.ErrorCode: errTusVersion,
	tusd.ErrLockTimeout.ErrorCode:        Describe(ErrUnavailable, "another request on this upload did not stop in time; try again"),
	tusd.ErrServerShutdown.ErrorCode:     Describe(ErrUnavailable, "the server is stopping; what arrived is kept: ask with HEAD later"),
	tusd.ErrUnexpectedEOF.ErrorCode:      Describe(ErrInvalidRequest, "the body ended early; what arrived is kept: ask with HEAD and go on from there"),
	tusd.ErrConnectionReset.ErrorCode:    Describe(ErrInvalidRequest, "the connection was reset; what arrived is kept: ask with HEAD and go on from there"),
	tusd.ErrReadTimeout.ErrorCode:        Describe(os.ErrDeadlineExceeded, "the body stopped arriving; what arrived is kept: ask with HEAD and go on from there"),
}

// tusWriter is the writer tusd answers through. An error tusd writes as
// text/plain is held at WriteHeader and answered, once its text says
// which it is, through the error table (tusdAnswers) in the spec's form;
// an error of berth's (tusError) is JSON already and goes out as it is.
// tusd's answer to a HEAD has no body: it goes out as it is too.
type tusWriter struct {
	http.ResponseWriter
	s *server
	r *http.Request
	// held is the status of a text/plain error not yet answered.
	held int
}

func (w *tusWriter) WriteHeader(code int) {
	if code >= 400 && w.r.Method != http.MethodHead && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.held = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *tusWriter) Write(b []byte) (int, error) {
	if w.held != 0 {
		w.answer(string(b))
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets tusd's http.ResponseController reach the connection (its
// read deadlines).
func (w *tusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// answer writes the held error whose text tusd sent. An error tusd made of
// a failure of its own (ERR_INTERNAL_SERVER_ERROR), or one of a code not in
// tusdAnswers, is 500 unknown, its text logged.
func (w *tusWriter) answer(text string) {
	text = strings.TrimSpace(text)
	code, _, _ := strings.Cut(text, ":")
	err, ok := tusdAnswers[code]
	switch {
	case w.r.Context().Err() != nil:
		// The client left (a stream cancelled); tusd calls the body's
		// failure its own. Nobody reads an answer: writeError is silent.
		err = fmt.Errorf("tus: %w (tusd answered %d %q)", w.r.Context().Err(), w.held, text)
	case !ok:
		err = fmt.Errorf("tus: tusd answered %d %q", w.held, text)
	}
	w.held = 0
	w.s.writeError(w.ResponseWriter, w.r, err)
}

// finish answers an error tusd held without writing its text.
func (w *tusWriter) finish() {
	if w.held != 0 {
		w.answer("")
	}
}

// tusBody is a request's body that notes (tusRequest.overrun) a byte past
// what the upload has left. tusd reads a body of unknown length (chunked)
// through http.MaxBytesReader up to that much, and hands the store its
// end as an EOF, the same as a body that ended there: without the note,
// the first bytes of a longer body were stored and made the file, while
// tusd answered 413.
type tusBody struct {
	io.ReadCloser
	left int64
	q    *tusRequest
}

func (b *tusBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		b.q.overrun.Store(true)
	}
	return n, err
}

// tusPiece is the body as the store reads it: at its end, a body that
// brought more than the upload has left fails the append (which then
// stores nothing), as one with a Content-Length too large does before it
// is read (413).
type tusPiece struct {
	r io.Reader
	q *tusRequest
}

func (p tusPiece) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err == io.EOF && p.q.overrun.Load() {
		return n, tusd.ErrSizeExceeded
	}
	return n, err
}

// tusAccess is the caller's access to root, which must let them write.
func (s *server) tusAccess(r *http.Request, root uint64) (fsAccess, error) {
	a, err := s.shares.Root(r.Context(), callerOf(r), root)
	if err != nil {
		return fsAccess{}, err
	}
	if !a.Perms.Has(share.Write) {
		return fsAccess{}, &share.Refusal{Reason: "this root is yours to read, not to change (" + share.Write.String() + ")"}
	}
	return accessOf(a), nil
}

// errTusNotFound answers an upload that is not, or not the caller's.
var errTusNotFound = Describe(ErrNotFound, "no such upload: it was finished, terminated or expired, or is not yours")

// tusUpload loads the upload of the path, which must be the caller's and
// in a root they may still write to. Anyone else's, like one that never
// was, is not_found.
func (s *server) tusUpload(r *http.Request) (vfs.Staged, fsAccess, error) {
	st, err := s.tusStaged(r)
	if err == nil && st.Owner != tusOwner(r) {
		err = errTusNotFound
	}
	if err != nil {
		return vfs.Staged{}, fsAccess{}, err
	}
	a, err := s.tusAccess(r, st.Root)
	return st, a, err
}

// tusStaged loads the upload of the path, whoever's it is.
func (s *server) tusStaged(r *http.Request) (vfs.Staged, error) {
	id, ok := parseID(r.PathValue("upload_id"))
	if !ok {
		return vfs.Staged{}, errTusNotFound
	}
	st, err := s.fs.StagedInfo(r.Context(), id)
	if errors.Is(err, vfs.ErrNotExist) {
		return vfs.Staged{}, errTusNotFound
	}
	return st, err
}

// tusOwnerPrefix begins the owner (vfs.Staged.Owner) of a tus upload,
// which the person's id follows.
const tusOwnerPrefix = "person:"

// tusOwner names the caller as the owner of the uploads they create.
func tusOwner(r *http.Request) string {
	return tusOwnerPrefix + strconv.FormatUint(callerOf(r).Person.ID, 10)
}

// TusHolder returns the vfs.StagedHolder of the tus uploads: an upload
// keeps its reservation while its creator may write to its root, as
// tusAccess decides for each of their requests. The creator's reservation
// is room that nobody else can use, and only they or an administrator of
// the root's organization (tusDelete) can end; once they are removed from the
// share (or its group), lose its write permission, or are deactivated or
// deleted, vfs ends the upload at its next sweep, or at once when a write
// to a root under the same quota is refused for want of room.
func TusHolder(accounts *account.Service, shares *share.Service) vfs.StagedHolder {
	return tusHolder{accounts: accounts, shares: shares}
}

type tusHolder struct {
	accounts *account.Service
	shares   *share.Service
}

// HoldsStaged implements vfs.StagedHolder. An upload not staged by tus
// (an owner of another form) is held: it is not this front end's to end.
func (h tusHolder) HoldsStaged(ctx context.Context, st vfs.Staged) (bool, error) {
	v, ok := strings.CutPrefix(st.Owner, tusOwnerPrefix)
	if !ok {
		return true, nil
	}
	pid, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return true, nil
	}
	c, err := h.accounts.Caller(ctx, pid)
	if errors.Is(err, account.ErrNotFound) || errors.Is(err, account.ErrInactive) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return rootPerms(ctx, h.shares, c, st.Root, share.Write)
}

// rootPerms reports whether caller c holds perms on root, false (not an
// error) where c reaches the root no more: it is gone, deleted, or not
// theirs, or c is inactive.
func rootPerms(ctx context.Context, shares *share.Service, c account.Caller, root uint64, perms share.Perm) (bool, error) {
	a, err := shares.Root(ctx, c, root)
	switch {
	case errors.Is(err, share.ErrNoRoot), errors.Is(err, share.ErrForbidden), errors.Is(err, account.ErrInactive),
		errors.Is(err, account.ErrNotFound), errors.Is(err, vfs.ErrRootDeleted), errors.Is(err, vfs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return a.Perms.Has(perms), nil
}

// tusChecksum reads Upload-Checksum: an algorithm of tusChecksums and
// the base64 digest of the PATCH's body.
func tusChecksum(h string) (vfs.AppendOptions, error) {
	if h == "" {
		return vfs.AppendOptions{}, nil
	}
	algo, digest, _ := strings.Cut(strings.TrimSpace(h), " ")
	mk, ok := tusChecksums[algo]
	if !ok {
		return vfs.AppendOptions{}, Describe(ErrInvalidRequest, "Upload-Checksum: the algorithm %q is not supported (Tus-Checksum-Algorithm: %s)", algo, tusAlgorithms)
	}
	sum, err := base64.StdEncoding.DecodeString(strings.TrimSpace(digest))
	if err != nil || len(sum) != mk().Size() {
		return vfs.AppendOptions{}, Describe(ErrInvalidRequest, "Upload-Checksum: the digest is not the base64 of a %s sum", algo)
	}
	return vfs.AppendOptions{Hash: mk(), Sum: sum}, nil
}

// tusError hands tusd err as a tusd.Error whose answer is berth's own,
// from the error table.
func (s *server) tusError(err error) error {
	var te tusd.Error
	if errors.As(err, &te) || errors.Is(err, context.Canceled) {
		return err
	}
	status, body, known := classify(err)
	if !known {
		s.log.Error("tus: request failed", "error", err)
	}
	return tusd.Error{ErrorCode: body.Error, Message: body.Description, HTTPResponse: tusd.HTTPResponse{
		StatusCode: status,
		Body:       string(body.json()) + "\n",
		Header:     tusd.HTTPHeader{"Content-Type": "application/json", "Cache-Control": "no-store"},
	}}
}

// tusStore is tusd's DataStore over vfs staged uploads. The handlers
// above staged the upload (NewUpload only hands it to tusd) and checked
// who asks; the store moves the bytes.
type tusStore struct{ s *server }

var (
	_ tusd.DataStore           = (*tusStore)(nil)
	_ tusd.TerminaterDataStore = (*tusStore)(nil)
)

// NewUpload returns the upload tusCreate staged.
func (t *tusStore) NewUpload(ctx context.Context, _ tusd.FileInfo) (tusd.Upload, error) {
	q := tusRequestOf(ctx)
	if q == nil || q.staged.ID == 0 {
		return nil, t.s.tusError(errors.New("tus: an upload created without being staged"))
	}
	return &tusUpload{s: t.s, id: q.staged.ID}, nil
}

// GetUpload returns the upload of id; GetInfo finds out whether it is.
func (t *tusStore) GetUpload(_ context.Context, id string) (tusd.Upload, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return nil, tusd.ErrNotFound
	}
	return &tusUpload{s: t.s, id: n}, nil
}

// AsTerminatableUpload is u: every upload can be terminated.
func (t *tusStore) AsTerminatableUpload(u tusd.Upload) tusd.TerminatableUpload {
	return u.(*tusUpload)
}

// tusUpload is one staged upload, as tusd sees it.
type tusUpload struct {
	s  *server
	id uint64
}

func (u *tusUpload) GetInfo(ctx context.Context) (tusd.FileInfo, error) {
	st, err := u.s.fs.StagedInfo(ctx, u.id)
	if err != nil {
		return tusd.FileInfo{}, u.s.tusError(err)
	}
	return tusd.FileInfo{ID: strconv.FormatUint(u.id, 10), Size: st.Length, Offset: st.Offset, MetaData: st.Meta}, nil
}

// WriteChunk appends what src yields. tusd's src ends at a broken
// connection as at the body's end, so a cut PATCH keeps what arrived.
func (u *tusUpload) WriteChunk(ctx context.Context, offset int64, src io.Reader) (int64, error) {
	var check vfs.AppendOptions
	q := tusRequestOf(ctx)
	if q != nil {
		check = q.check
		src = tusPiece{r: src, q: q}
	}
	st, err := u.s.fs.Append(ctx, u.id, offset, src, check)
	if err != nil {
		return 0, u.s.tusError(err)
	}
	if q != nil && q.w != nil {
		q.w.Header().Set("Upload-Expires", st.Expires.Format(http.TimeFormat))
	}
	return st.Offset - offset, nil
}

// FinishUpload makes the file, under the caller's write options.
func (u *tusUpload) FinishUpload(ctx context.Context) error {
	var opts vfs.WriteOptions
	if q := tusRequestOf(ctx); q != nil {
		if q.overrun.Load() {
			// tusd finishes an upload whose offset is its length
			// whatever the piece's fate: an empty one, whose
			// refused piece stored nothing, too.
			return tusd.ErrSizeExceeded
		}
		opts = q.opts
	}
	if _, err := u.s.fs.Finish(ctx, u.id, opts); err != nil {
		return u.s.tusError(nameError(false, err))
	}
	return nil
}

func (u *tusUpload) GetReader(context.Context) (io.ReadCloser, error) {
	return nil, tusd.ErrNotImplemented
}

func (u *tusUpload) Terminate(ctx context.Context) error {
	if err := u.s.fs.Terminate(ctx, u.id); err != nil {
		return u.s.tusError(err)
	}
	return nil
}
