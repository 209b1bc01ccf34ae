// Package rest serves berth's REST API under /api/2 (and, later, OAuth2
// under /oauth) over net/http: it decodes requests, calls the domain
// packages, encodes JSON and maps errors through one table (errors.go).
//
// Routes are registered on a net/http.ServeMux with method and wildcard
// patterns. Each group of routes lives in its own file as a method
// `func (s *server) xxxRoutes()` called from routes, and registers its
// handlers with s.handle (JSON) or s.handleStream (downloads).
package rest

import (
	"context"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	tusd "github.com/tus/tusd/v2/pkg/handler"

	"berth/account"
	"berth/activity"
	"berth/agentlink"
	"berth/httpserve"
	"berth/share"
	"berth/vfs"

	"github.com/prometheus/client_golang/prometheus"
)

// APIVersion is the API version answered by GET /api/2/version (spec 9).
const APIVersion = "2.0.0"

// Options are what the REST API needs. The daemon fills them.
type Options struct {
	// Logger receives one line per request and the detail of failures.
	// Nil discards.
	Logger *slog.Logger
	// Registerer receives the HTTP metrics. Nil keeps them unregistered.
	Registerer prometheus.Registerer
	// Version is answered by GET /api/2/version. Empty means APIVersion.
	Version string
	// FS is the file system the file routes serve.
	FS *vfs.FS
	// Accounts authenticates callers and holds persons and policies.
	Accounts *account.Service
	// Share says which roots a caller reaches and on what terms. Nil
	// means share.New over FS.
	Share *share.Service
	// Activity is the activity log the activity routes read and write.
	// Nil: the log holds nothing and activity/create is refused.
	Activity *activity.Log
	// PublicURL is the base of share link URLs (url: PublicURL + "/s/" +
	// hash) and of tus uploads' Locations. Empty: https:// and the
	// request's Host.
	PublicURL string
	// Invite delivers an organization share's invitation to a new
	// external subscriber (by mail: the token goes to the address, which
	// accepts it at POST /api/2/shares/accept). Nil delivers nothing: the
	// address stays invited. A failure is logged; the subscribers are
	// stored regardless.
	Invite func(ctx context.Context, inv share.Invitation) error
	// Agents are the machines' agents connected to this node
	// (agentchannel.go, docs/agent.md). Nil: a Hub of the server's own.
	Agents *agentlink.Hub
	// ClusterSecret is what another node must send to relay a call to an
	// agent connected here (agentrelay.go). Empty: the relay route
	// refuses every call, as on a lone node.
	ClusterSecret string
	// TusExpiry is how long a resumable (tus) upload lives without a
	// PATCH; 0 means DefaultTusExpiry.
	TusExpiry time.Duration
	// TusMaxUploads bounds the resumable uploads one person may have in
	// progress at once (vfs.StageOptions.MaxPerOwner); past it a creation
	// is 400 invalid_request. 0 means DefaultTusMaxUploads, less than 0
	// no bound.
	TusMaxUploads int
	// TusCommitEvery is how many bytes of a tus PATCH are stored before
	// they are committed, as the body arrives (vfs.AppendOptions.Every);
	// 0 means DefaultTusCommitEvery.
	TusCommitEvery int64
	// ActivityNotesPerHour bounds the notes (POST activity/create) one
	// person may add in an hour; past it 429 too_many_requests. 0 means
	// DefaultActivityNotesPerHour, less than 0 no bound.
	ActivityNotesPerHour int
}

// server holds what every handler shares.
type server struct {
	opts     Options
	agents   *agentlink.Hub
	fs       *vfs.FS
	accounts *account.Service
	shares   *share.Service
	log      *slog.Logger
	mux      *http.ServeMux
	// relayRefused bounds the log lines of refused relayed agent calls
	// to one a minute (agentrelay.go).
	relayRefused *account.Budget
	// metrics are the HTTP families every front end shares, built once
	// per registry: a WebDAV handler on the same registry counts into the
	// same families, told apart by route.
	metrics *httpserve.Metrics
	// methods are those routes were registered with (HEAD with GET), and
	// public the patterns of routes that take no token: what unrouted
	// asks the mux about and answers by.
	methods []string
	public  map[string]bool
	// patterns are every route's, in registration order: the walks of
	// every route (access and isolation tests) take them from here, so a
	// new route cannot be left out of them.
	patterns []string
	// tus serves the resumable uploads (tus.go).
	tus *tusd.UnroutedHandler
	// notes counts each person's activity notes of the hour
	// (Options.ActivityNotesPerHour).
	notes *account.Budget
}

// New returns the REST API handler.
func New(opts Options) http.Handler {
	s := newServer(opts)
	return s.observe(s.routable(s.mux))
}

// newServer builds the server with its routes registered.
func newServer(opts Options) *server {
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.Version == "" {
		opts.Version = APIVersion
	}
	if opts.TusExpiry <= 0 {
		opts.TusExpiry = DefaultTusExpiry
	}
	if opts.TusCommitEvery <= 0 {
		opts.TusCommitEvery = DefaultTusCommitEvery
	}
	if opts.TusMaxUploads == 0 {
		opts.TusMaxUploads = DefaultTusMaxUploads
	}
	if opts.ActivityNotesPerHour == 0 {
		opts.ActivityNotesPerHour = DefaultActivityNotesPerHour
	}
	if opts.Share == nil {
		opts.Share = share.New(share.Options{FS: opts.FS, Accounts: opts.Accounts})
	}
	if opts.Agents == nil {
		opts.Agents = agentlink.New()
	}
	s := &server{
		agents:   opts.Agents,
		opts:     opts,
		fs:       opts.FS,
		accounts: opts.Accounts,
		shares:   opts.Share,
		log:      opts.Logger,
		mux:      http.NewServeMux(),
		metrics:  httpserve.NewMetrics(opts.Registerer),
		notes:    account.NewBudget(opts.ActivityNotesPerHour, time.Hour, nil),
		// The route takes no token: anyone who reaches it could
		// otherwise write a line to the log with every request.
		relayRefused: account.NewBudget(1, time.Minute, nil),
	}
	s.routes()
	return s
}

// routes registers every route group.
func (s *server) routes() {
	s.handlePublic("GET /api/2/version", s.version)
	s.oauthRoutes()
	s.personRoutes()
	s.organizationRoutes()
	s.orgShareRoutes()
	s.guestRoutes()
	s.rootRoutes()
	s.fileRoutes()
	s.folderRoutes()
	s.zipRoutes()
	s.groupRoutes()
	s.activityRoutes()
	s.usageRoutes()
	s.sharelinkRoutes()
	s.devicePasswordRoutes()
	s.machineRoutes()
	s.agentRoutes()
	s.agentUploadRoutes()
	s.tusRoutes()
	s.authSourceRoutes()
	s.twoStepRoutes()

	// Anything no pattern matches goes through the error table, not
	// ServeMux's text 404 and 405.
	s.handle("/", s.unrouted)
}

// routable answers with a JSON 404 the requests ServeMux would answer
// itself, in a form the spec does not allow: a path that is not canonical
// (dot segments, repeated slashes) gets a 307 redirect to the cleaned path
// with an HTML body, and a POST re-sent there acts on whatever the cleaned
// path names; a CONNECT gets a plain-text 404. No client of the API sends
// either, so neither is followed.
//
// It also refuses a request body with a content coding (RFC 9110 8.4):
// nothing in berth decodes one, so a gzipped upload would be stored as
// the gzip bytes and a gzipped form read as garbage.
func (s *server) routable(mux http.Handler) http.Handler {
	notCanonical := s.serveJSON(func(*http.Request) (any, error) {
		return nil, Describe(ErrNotFound, "the path is not in canonical form (no dot segments or repeated slashes)")
	})
	notFound := s.serveJSON(func(*http.Request) (any, error) { return nil, ErrNotFound })
	encoded := s.serveJSON(func(*http.Request) (any, error) {
		return nil, Describe(ErrInvalidRequest, "request bodies with a Content-Encoding are not accepted; send them uncompressed")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.EscapedPath(); {
		case r.Method == http.MethodConnect:
			notFound.ServeHTTP(w, r)
		case !canonicalPath(p):
			notCanonical.ServeHTTP(w, r)
		case r.ContentLength != 0 && contentCoded(r.Header):
			encoded.ServeHTTP(w, r)
		default:
			mux.ServeHTTP(w, r)
		}
	})
}

// contentCoded reports whether h names a content coding other than
// identity for the request body.
func contentCoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// canonicalPath reports whether ServeMux would route p as it is, without
// redirecting to a cleaned form: p starts with a slash and path.Clean
// leaves it alone, but for one trailing slash.
func canonicalPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	return p == c || (c != "/" && p == c+"/")
}

// handle registers a JSON handler of a route that takes a token (h checks
// it, through authed); unrouted counts on that to ask for one first.
func (s *server) handle(pattern string, h JSONHandler) {
	s.registered(pattern, false)
	s.mux.Handle(pattern, s.serveJSON(h))
}

// handlePublic registers a JSON handler of a route that takes no token
// (GET /api/2/version, /oauth), so that a wrong method there answers 405
// without one.
func (s *server) handlePublic(pattern string, h JSONHandler) {
	s.registered(pattern, true)
	s.mux.Handle(pattern, s.serveJSON(h))
}

// handleStream registers a download handler.
func (s *server) handleStream(pattern string, h StreamHandler) {
	s.registered(pattern, false)
	s.mux.Handle(pattern, s.serveStream(h))
}

// versionBody is the answer of GET /api/2/version.
type versionBody struct {
	Version string `json:"version"`
}

func (s *server) version(*http.Request) (any, error) {
	return versionBody{Version: s.opts.Version}, nil
}

// InsecureHandler answers every request with 400 insecure_transport; it
// serves the optional plain-HTTP listener (spec 1 and 7.1).
func InsecureHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body, _ := classify(ErrInsecureTransport)
		writeErrorBody(w, status, body)
	})
}
