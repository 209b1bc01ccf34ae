package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"berth/account"
	"berth/activity"
	"berth/config"
	"berth/httpserve"
	"berth/kv"
	"berth/rest"
	"berth/share"
	"berth/vfs"
	"berth/web"
	"berth/webdav"
)

// stores are the opened storage layers, closed in reverse order.
type stores struct {
	db    kv.Store // the metadata engine (openMetadata); see metricsCollector, kv.GCer, kv.Failer
	files *vfs.FS
	// activity is the log, and journal its hook in files, which learns
	// root owners once the account service exists (newAccounts).
	activity *activity.Log
	journal  *fileJournal
	// holder is the file system's vfs.StagedHolder, which learns the tus
	// front end's once the accounts and shares exist (serve).
	holder *uploadHolder
	// jobs runs the background jobs once per cluster (cluster.go); nil
	// runs them here regardless.
	jobs *clusterJobs
}

// newAccounts returns the account service over the stores, wired to the
// activity log: its changes are recorded, and the file system's records
// name the owners of roots.
func (s *stores) newAccounts(o account.Options) *account.Service {
	o.Journal = accountJournal{s.activity}
	a := account.New(s.db, o)
	s.journal.owners.Store(a)
	return a
}

// metricsCollector is a metadata store that reports its own figures to
// Prometheus (kv/badger: sizes and caches); found by type assertion, like
// kv.GCer, so nothing after Open names the engine.
type metricsCollector interface {
	Collector() prometheus.Collector
}

// openStores opens the metadata store, the chunk store and the file system
// in cfg.Data, creating the directory on first start. reg may be nil.
func openStores(ctx context.Context, cfg config.Config, log *slog.Logger, reg prometheus.Registerer) (*stores, error) {
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return nil, dataDirRefused(cfg.Data, fmt.Errorf("creating data directory: %w", err))
	}
	if err := checkFormat(cfg.Data); err != nil {
		return nil, dataDirRefused(cfg.Data, err)
	}
	// The memtable Badger allocates whole must land on memory the
	// runtime has handed back to the kernel, which reads as zeros: on
	// the start's freed garbage it is zeroed by hand, all of it
	// resident, and idle RSS was 39 MiB instead of 29 one start in two.
	debug.FreeOSMemory()
	db, err := openMetadata(ctx, cfg, log)
	if err != nil {
		if cfg.Metadata.Backend == "badger" || cfg.Metadata.Backend == "" {
			err = dataDirRefused(cfg.Data, err)
		}
		return nil, err
	}
	zipHeld := applyMemoryLimit(cfg.Memory, log)
	chunks, err := openChunks(ctx, cfg, log, reg, db)
	if err != nil {
		db.Close()
		if cfg.Storage.Backend != "s3" {
			err = dataDirRefused(cfg.Data, err)
		}
		return nil, err
	}
	acts := activity.New(db, activity.Options{Retention: cfg.Activity.Retention})
	journal := &fileJournal{log: acts}
	readAhead := cfg.Memory.ReadAhead
	if readAhead == 0 {
		readAhead = -1 // the configuration's 0 is none; vfs's is its default
	}
	holder := &uploadHolder{}
	files, err := vfs.Open(ctx, db, chunks, vfs.Options{Logger: log.With("component", "vfs"), Registerer: reg, Journal: journal, Holder: holder, ReadAhead: readAhead, ReadAheadBudget: readAheadBudget(cfg.Memory), SegmentBudget: segmentBudget(cfg.Memory), OrphanGrace: orphanGrace(db), ZipBudget: int64(cfg.Memory.ZipLayouts), ZipHeld: zipHeld})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening file system: %w", err)
	}
	return &stores{db: db, files: files, activity: acts, journal: journal, holder: holder}, nil
}

// dataDirRefused adds the fix to an error of opening the data directory
// dir that is a refused permission. Its usual cause is a directory made
// by another user: root running berth by hand before the service, which
// runs as its own user, did. The error alone names a file and "permission
// denied"; this names the user berth runs as and the command that hands
// the directory over. Other errors are returned as they are.
func dataDirRefused(dir string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	uid := strconv.Itoa(os.Geteuid())
	who, owner := "uid "+uid, uid
	if u, uerr := user.LookupId(uid); uerr == nil {
		who, owner = u.Username+" (uid "+uid+")", u.Username
	}
	if abs, aerr := filepath.Abs(dir); aerr == nil {
		dir = abs
	}
	fix := fmt.Sprintf("give it to that user (chown -R %s %s)", owner, dir)
	if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
		// Its parent refused the mkdir: nothing to chown yet.
		fix = fmt.Sprintf("create it for that user (install -d -m 0700 -o %s %s)", owner, dir)
	}
	return fmt.Errorf("%w; berth runs as %s, which may not read and write the data directory %s: %s or choose another with --data", err, who, dir, fix)
}

// uploadHolder is a vfs.StagedHolder set once the one it stands for
// exists: until then, and in commands that serve no uploads, every staged
// upload is held.
type uploadHolder struct {
	h atomic.Pointer[vfs.StagedHolder]
}

func (u *uploadHolder) set(h vfs.StagedHolder) { u.h.Store(&h) }

// HoldsStaged implements vfs.StagedHolder.
func (u *uploadHolder) HoldsStaged(ctx context.Context, s vfs.Staged) (bool, error) {
	h := u.h.Load()
	if h == nil {
		return true, nil
	}
	return (*h).HoldsStaged(ctx, s)
}

// close closes the file system, then the metadata store.
func (s *stores) close(log *slog.Logger) {
	if err := s.files.Close(); err != nil {
		log.Error("closing file system", "error", err)
	}
	if err := s.db.Close(); err != nil {
		log.Error("closing metadata store", "error", err)
	}
}

// accountOptions maps the configuration onto the account service.
func accountOptions(cfg config.Config) account.Options {
	o := account.DefaultOptions()
	o.AccessTTL = cfg.OAuth.AccessTokenTTL
	o.RefreshTTL = cfg.OAuth.RefreshTokenTTL
	o.RefreshReuseGrace = cfg.OAuth.RefreshReuseGrace
	o.Lockout.MaxFailures = cfg.Lockout.MaxFailures
	o.Lockout.Duration = cfg.Lockout.Duration
	o.Lockout.Window = cfg.Lockout.Window
	o.Lockout.AddressMaxFailures = cfg.Lockout.AddressMaxFailures
	o.Lockout.AddressWindow = cfg.Lockout.AddressWindow
	o.Lockout.AddressDuration = cfg.Lockout.AddressDuration
	o.Lockout.KnownAddressTTL = cfg.Lockout.KnownAddressTTL
	o.Lockout.RefusalDelay = cfg.Lockout.RefusalDelay
	o.MaxHashQueue = cfg.Lockout.HashQueue
	return o
}

// serve runs the daemon until ctx is cancelled, then shuts down
// gracefully. out receives the one-time first-run message.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, out io.Writer) (err error) {
	log.Info("starting berth", "version", buildVersion(), "data", cfg.Data)
	defer func() {
		// SIGTERM while starting (systemctl stop or restart during a
		// recovery, Ctrl-C) cancels what was under way, which is then
		// closed like at any stop: a requested stop, not a failure, and
		// systemd takes a stopped service's non-zero exit for one.
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			log.Info("stopped during start-up", "interrupted", err)
			err = nil
		}
	}()
	// SIGHUP would end the process (Go's default), and systemd counts
	// that as a clean stop it does not restart; it means reload here,
	// and one arriving during start-up waits for the certificate.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reg := newRegistry()
	starting, started := context.WithCancel(ctx)
	defer started()
	go extendStartTimeout(starting, startExtendEvery, log)
	st, err := openStores(ctx, cfg, log, reg)
	if err != nil {
		return err
	}
	defer st.close(log)
	if cfg.Memory.KVMapTrim > 0 && (cfg.Metadata.Backend == "badger" || cfg.Metadata.Backend == "") {
		trimCtx, stopTrim := context.WithCancel(ctx)
		trimmed := make(chan struct{})
		go func() {
			defer close(trimmed)
			trimMappings(trimCtx, filepath.Join(cfg.Data, "meta"), cfg.Memory.KVMapTrim, log)
		}()
		defer func() { stopTrim(); <-trimmed }() // before st.close unmaps
	}
	if c, ok := st.db.(metricsCollector); ok {
		reg.MustRegister(c.Collector())
	}

	ao := accountOptions(cfg)
	ao.Logger, ao.Registerer = log.With("component", "account"), reg
	if ao.Directory, err = directoryOptions(cfg.Directory); err != nil {
		return err
	}
	codes, tso, err := newCodeSender(cfg, log.With("component", "two_step"))
	if err != nil {
		return err
	}
	ao.TwoStep = tso
	accounts := st.newAccounts(ao)
	mailer, err := newMailNotifier(cfg.SMTP, log.With("component", "mail"), reg)
	if err != nil {
		return err
	}
	codes.mail = mailer // two-step codes by e-mail go through it
	// A start that fails below stops the senders; after a stop this
	// returns at once (Close below has run).
	defer mailer.Close(context.Background())
	// Share links' download and upload notices and organization share
	// invitations go out through it (or are logged when no SMTP server
	// is configured).
	shares := share.New(share.Options{FS: st.files, Accounts: accounts, Store: st.db, Notifier: mailer, PublicURL: cfg.PublicURL,
		InvitationTTL: cfg.Shares.InvitationTTL, MailPerHour: noBound(cfg.SMTP.MaxPerHour), Logger: log.With("component", "share")})
	st.holder.set(rest.TusHolder(accounts, shares))

	tlsCfg, certs, err := tlsConfig(cfg.TLS, cfg.Data, log)
	if err != nil {
		return err
	}
	st.jobs = newClusterJobs(st.db, log.With("component", "jobs"))
	// The machines' agents connected here, and on several nodes the
	// relay of calls to those connected elsewhere (cluster.go).
	agents, clusterSecret, err := agentHub(cfg.Cluster, st.db, st.jobs.holder, log.With("component", "agents"))
	if err != nil {
		return err
	}
	api := rest.New(rest.Options{
		Logger:        log.With("component", "rest"),
		Registerer:    reg,
		FS:            st.files,
		Accounts:      accounts,
		Share:         shares,
		Activity:      st.activity,
		Invite:        mailer.invite,
		PublicURL:     cfg.PublicURL,
		Agents:        agents,
		ClusterSecret: clusterSecret,
		TusMaxUploads: noBound(cfg.Tus.MaxUploads),
		// Notes past it: 429 (docs/api.md "Activity").
		ActivityNotesPerHour: noBound(cfg.Activity.NotesPerHour),
	})

	proxies, err := config.Prefixes(cfg.HTTP.TrustedProxies)
	if err != nil {
		return err // Validate has checked it
	}

	connsRefused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "berth_http_connections_refused_total",
		Help: "Connections (HTTPS, plain HTTP, metrics) closed as they were accepted because their client address held http.max_conns_per_address already on that listener.",
	})
	reg.MustRegister(connsRefused)

	// Bind every listener before serving any, so a taken port fails the
	// start cleanly and READY means all of them accept.
	var servers []*listener
	defer func() {
		for _, l := range servers {
			l.ln.Close()
		}
	}()
	// key is the configuration key of addr, named in the error so the
	// operator knows which setting to change (a taken port, say).
	bind := func(name, key, addr string, h http.Handler, tls bool) error {
		if addr == "" {
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s: %s listener: %w%s", key, name, err, bindFix(key, err))
		}
		// Innermost, so a refused connection costs no handshake. Every
		// listener's connections are descriptors of the one process:
		// bounded on HTTPS alone, one address held them all through
		// the plain-HTTP or metrics listener.
		ln = limitPerAddress(ln, cfg.HTTP.MaxConnsPerAddress, proxies, connsRefused)
		if tls {
			// Plain HTTP sent here gets the JSON insecure_transport
			// of the plain-HTTP listener, not net/http's text.
			ln = rejectPlainHTTP(ln, rest.InsecureHandler(), int64(cfg.HTTP.MaxHeaderBytes))
			// A large download sends its TLS records in large writes.
			ln = httpserve.CoalesceListener(ln)
		}
		// No ReadTimeout or WriteTimeout: they bound a whole request
		// or answer, and would cut a large upload or download on a
		// slow link however steadily it moves. A stalled body is
		// bounded by http.body_idle_timeout instead (withBodyIdleTimeout,
		// which moves the read deadline and would override a
		// ReadTimeout anyway), headers by ReadHeaderTimeout and a
		// connection between requests by IdleTimeout. Every listener
		// gets it: a body no handler reads is read by net/http itself.
		srv := &http.Server{
			Handler:           withSendIdleTimeout(withBodyIdleTimeout(h, cfg.HTTP.BodyIdleTimeout), cfg.HTTP.SendIdleTimeout),
			ReadHeaderTimeout: 10 * time.Second,
			MaxHeaderBytes:    int(cfg.HTTP.MaxHeaderBytes),
			IdleTimeout:       2 * time.Minute,
			// Bounded: it writes a line for every failed TLS handshake.
			ErrorLog: serverErrorLog(log, name),
		}
		if tls {
			// Only the HTTPS listener has withClientAddr and Hold's callers.
			srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
				return peerContext(httpserve.ConnContext(ctx, c), c, proxies)
			}
			srv.TLSConfig = tlsCfg
			srv.Protocols = new(http.Protocols)
			srv.Protocols.SetHTTP1(true)
			if cfg.TLS.HTTP2 {
				srv.Protocols.SetHTTP2(true)
				// Go's HTTP/2 server lets a client send 1 MiB per
				// stream before it must wait for a window update,
				// which holds a large upload far below what the
				// disk takes.
				srv.HTTP2 = &http.HTTP2Config{
					MaxReceiveBufferPerStream:     4 << 20,
					MaxReceiveBufferPerConnection: 8 << 20,
				}
			}
		}
		servers = append(servers, &listener{name: name, ln: ln, srv: srv, tls: tls})
		return nil
	}
	dav := webdav.New(webdav.Options{
		Logger:        log.With("component", "webdav"),
		FS:            st.files,
		Accounts:      accounts,
		Share:         shares,
		Prefix:        "/webdav",
		InfiniteDepth: cfg.WebDAV.InfiniteDepth,
		MaxXMLBodies:  noBound(cfg.WebDAV.MaxXMLBodies),
		Registerer:    reg,
	})
	pages := web.New(web.Options{
		Logger:     log.With("component", "web"),
		FS:         st.files,
		Accounts:   accounts,
		Share:      shares,
		Registerer: reg,
	})
	if err := bind("https", "listen", cfg.Listen, withHSTS(withClientAddr(withWebDAV(dav, withPages(pages, api)), proxies)), true); err != nil {
		return err
	}
	if err := bind("http", "http_listen", cfg.HTTPListen, rest.InsecureHandler(), false); err != nil {
		return err
	}
	if err := bind("metrics", "metrics_listen", cfg.MetricsListen, metricsHandler(reg, st.db), false); err != nil {
		return err
	}
	// Only now, with the certificate loaded and every port taken: a start
	// that fails on either must not have created the organization and
	// printed the one-time password, which the start that works would
	// then not print again.
	if err := firstRun(ctx, cfg, st.files, accounts, log, out); err != nil {
		return err
	}

	serveErr := make(chan error, len(servers))
	attrs := []any{}
	for _, l := range servers {
		attrs = append(attrs, l.name, l.ln.Addr().String())
		go func() { serveErr <- l.serve() }()
	}
	log.Info("listening", attrs...)
	started()
	notify(log, sd.SdNotifyReady)

	var bg sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	bg.Go(func() { watchdog(bgCtx, st.db, log) })
	bg.Go(func() { watchClock(bgCtx, st.db, reg, log) })
	bg.Go(func() { agents.Run(bgCtx) })
	bg.Go(func() { collectGarbage(bgCtx, cfg.GC.Interval, cfg.GC.PurgeDeletedAfter, st, log) })
	bg.Go(func() { expireUploads(bgCtx, expireUploadsEvery, st, log) })
	bg.Go(func() { pruneActivity(bgCtx, pruneActivityEvery, st, log) })
	bg.Go(func() { finishGroupDeletions(bgCtx, st, accounts, log) })
	bg.Go(func() { dateInvitations(bgCtx, st, shares, log) })
	bg.Go(func() { indexLinkSubjects(bgCtx, st, shares, log) })
	policy := newPolicyJobs(st.files, accounts, log.With("component", "policy"), reg, cfg.Policy.Batch)
	policy.jobs = st.jobs
	bg.Go(func() { policy.loop(bgCtx, cfg.Policy.Interval) })
	directory := newDirectoryJobs(accounts, shares, log.With("component", "directory"), reg)
	directory.jobs = st.jobs
	bg.Go(func() { directory.loop(bgCtx, cfg.Directory.ImportInterval) })
	bg.Go(func() { reloadOnHangup(bgCtx, hup, certs, log) })

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("stopping: signal received", "grace", cfg.ShutdownGrace)
	case runErr = <-serveErr:
		// A listener stops on its own only by failing.
		log.Error("stopping: listener failed", "error", runErr)
	}
	notify(log, sd.SdNotifyStopping)
	stopBG()

	// The agents' channels are requests that last as long as their
	// agents run: Shutdown would wait the whole grace for them.
	agents.Close()
	// A fresh context: ctx is already cancelled and would drain nothing.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range servers {
		wg.Go(func() {
			if err := l.srv.Shutdown(shutdownCtx); err != nil {
				log.Warn("grace period over; closing remaining connections", "listener", l.name, "error", err)
				l.srv.Close()
			}
		})
	}
	wg.Wait()
	bg.Wait()
	mailer.Close(shutdownCtx)
	log.Info("stopped")
	return runErr
}

// withWebDAV sends /webdav and everything below it to dav, the rest to api.
// A prefix test, not a ServeMux: ServeMux would clean "..", "//" and
// redirect, where WebDAV wants such paths refused as they are sent.
func withWebDAV(dav, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "/webdav" || strings.HasPrefix(p, "/webdav/") {
			dav.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// withPages sends the share-link pages (web.Prefix, where links' url
// fields point) to pages, the rest to api.
func withPages(pages, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, web.Prefix) {
			pages.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// bindFix is what to do about a listener's address that would not bind,
// for the two refusals a new operator meets (a port taken, a privileged
// port), naming the key and its flag; "" for any other error.
func bindFix(key string, err error) string {
	where := key + ", --" + strings.ReplaceAll(key, "_", "-")
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return "; another program (or berth) listens there: stop it, or choose another address (" + where + ")"
	case errors.Is(err, syscall.EACCES):
		return "; a port below 1024 needs CAP_NET_BIND_SERVICE (berth.service grants it), or choose a port above 1023 (" + where + ")"
	}
	return ""
}

// listener is one bound address and its server.
type listener struct {
	name string
	ln   net.Listener
	srv  *http.Server
	tls  bool
}

// serve runs until Shutdown; only a real failure is returned.
func (l *listener) serve() error {
	var err error
	if l.tls {
		// The certificate is in TLSConfig; ServeTLS offers HTTP/2 only
		// when srv.Protocols has it (tls.http2).
		err = l.srv.ServeTLS(l.ln, "", "")
	} else {
		err = l.srv.Serve(l.ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("%s listener: %w", l.name, err)
}

// reloadOnHangup reloads the TLS certificate at every SIGHUP (systemctl
// reload), telling systemd it is reloading and when it is done. Other
// settings take a restart: they shape listeners and stores that cannot
// change under running requests.
func reloadOnHangup(ctx context.Context, hup <-chan os.Signal, certs *certSource, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		notify(log, sd.SdNotifyReloading+"\n"+monotonicUsec())
		if err := certs.load(); err != nil {
			log.Error("reload: keeping the TLS certificate in use", "error", err)
		} else {
			log.Info("reload: TLS certificate loaded", "cert", certs.certFile, "not_after", certs.notAfter())
		}
		notify(log, sd.SdNotifyReady)
	}
}

// notify sends state to systemd; outside systemd it does nothing.
func notify(log *slog.Logger, state string) {
	if _, err := sd.SdNotify(false, state); err != nil {
		log.Warn("sd_notify failed", "state", state, "error", err)
	}
}

// monotonicUsec is the MONOTONIC_USEC field systemd wants with
// RELOADING=1, to tell this reload from an earlier one.
func monotonicUsec() string {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return ""
	}
	return fmt.Sprintf("MONOTONIC_USEC=%d", ts.Nano()/1000)
}

// noBound is the option of a domain package (rest.Options.TusMaxUploads,
// ActivityNotesPerHour, share.Options.MailPerHour,
// webdav.Options.MaxXMLBodies) for a configured bound n, whose 0 means no
// bound where the package's 0 means its default and less than 0 none.
func noBound(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
