// Package account is berth's "who": organizations and their policies,
// persons and their passwords, login with lockout, OAuth2 access and refresh
// tokens, and machines (the devices people sign in from).
//
// It stores everything in kv (key layout in keys.go) and imports nothing
// else of berth's. Creating a person's sync root is the caller's job: the
// caller creates the root in vfs and records it with SetPersonRoot.
package account

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/kv"
)

// Options configure a Service. Start from DefaultOptions and change fields.
type Options struct {
	// Now is the clock for timestamps and expiry checks. Default time.Now.
	// Stored keys also expire by kv TTL, which follows the real clock.
	Now func() time.Time
	// AccessTTL is the lifetime of an access token (spec 5.3 expires_in).
	// Default 1 hour.
	AccessTTL time.Duration
	// RefreshTTL is the lifetime of a refresh token and of its token family;
	// every refresh starts a new period. Default 30 days.
	RefreshTTL time.Duration
	// RefreshReuseGrace is how long after a refresh the refresh token it
	// replaced may be presented again without revoking the session, as by
	// a client retrying a refresh whose answer was lost: it gets a new
	// pair, and the pair it never received stops working. Zero turns the
	// grace off (any reuse revokes); DefaultOptions has 30 seconds.
	RefreshReuseGrace time.Duration
	// Argon2 are the password hashing parameters for new hashes. Existing
	// hashes keep the parameters recorded in them.
	Argon2 Argon2Params
	// Lockout configures the failed-login lock (spec 5.4, 7.4).
	Lockout LockoutOptions
	// MaxHashQueue bounds the sign-ins waiting for an argon2 slot (there
	// are GOMAXPROCS-1 slots, at least one); one more is refused with
	// ErrBusy. Default 64: at about 45 ms a hash, one slot on two cores,
	// the last waits about 3 s.
	MaxHashQueue int
	// MaxSessions bounds the sessions (token families) one person holds
	// at once. Default 100.
	MaxSessions int
	// MaxMachines bounds the machine records one person holds: each
	// password grant without a known guid makes one (spec 2.12), so a
	// script signing in again and again would grow them without end. At
	// the bound a new one takes the place of the least recently signed-in
	// machine that nothing is set up on, one without a live session
	// first (makeRoomForMachine). Default 100.
	MaxMachines int
	// MinPasswordLength is the shortest password, in characters, that
	// CreatePerson, SetPassword and ResetPassword accept. Default 8.
	MinPasswordLength int
	// Logger receives failed logins and lockouts, at warn. Nil: nothing
	// is logged.
	Logger *slog.Logger
	// Journal records every account change in the transaction that
	// makes it (the activity log). Nil: changes are not recorded.
	Journal Journal
	// Registerer takes the login metrics (berth_login_failures_total,
	// berth_account_lockouts_total). Nil: no metrics.
	Registerer prometheus.Registerer
	// Directory configures the connections to directory servers (authsource.go).
	Directory DirectoryOptions
	// TwoStep configures two-step verification (twostep.go).
	TwoStep TwoStepOptions
}

// LockoutOptions configure the failed-login lock. The spec leaves the
// threshold and duration open ("not shown"); the defaults are berth's choice.
type LockoutOptions struct {
	// MaxFailures failed logins within Window lock the login. Default 5.
	MaxFailures int
	// Window is counted from the first failure of a series. Default 15 minutes.
	Window time.Duration
	// Duration is how long a lock lasts. Default 15 minutes.
	Duration time.Duration
	// AddressMaxFailures failed sign-ins from one client address (an
	// IPv4 address, an IPv6 /64) within AddressWindow throttle the
	// address for AddressDuration: its attempts are refused unchecked,
	// whatever login they name. Only attempts whose context carries an
	// address (WithClientAddr) count. Default 10, 15 minutes, 15 minutes.
	AddressMaxFailures int
	AddressWindow      time.Duration
	AddressDuration    time.Duration
	// KnownAddressTTL is how long a person's successful sign-in makes
	// its address's network known for them: there, their attempts count
	// on a counter of their own, and neither the account's lock nor the
	// address's throttle applies. DefaultOptions has 30 days; zero turns
	// it off.
	KnownAddressTTL time.Duration
	// RefusalDelay holds the answer to an attempt refused unchecked (a
	// lock or a throttle) from a client with an address, so a flood gets
	// one refusal per connection and delay, not thousands a second.
	// DefaultOptions has 3 seconds; zero answers at once.
	RefusalDelay time.Duration
}

// DefaultOptions returns the production defaults documented on each field.
func DefaultOptions() Options {
	return Options{
		Now:               time.Now,
		AccessTTL:         time.Hour,
		RefreshTTL:        30 * 24 * time.Hour,
		RefreshReuseGrace: 30 * time.Second,
		Argon2:            DefaultArgon2Params(),
		Lockout: LockoutOptions{MaxFailures: 5, Window: 15 * time.Minute, Duration: 15 * time.Minute,
			AddressMaxFailures: 10, AddressWindow: 15 * time.Minute, AddressDuration: 15 * time.Minute,
			KnownAddressTTL: 30 * 24 * time.Hour, RefusalDelay: 3 * time.Second},
		MaxHashQueue:      64,
		MinPasswordLength: 8,
		MaxSessions:       100,
		MaxMachines:       100,
	}
}

// Service is the account domain over a kv.Store. It is safe for concurrent use.
type Service struct {
	db    kv.Store
	opts  Options
	codec codec
	// hashSlots bounds concurrent argon2 computations (one fewer than
	// the CPUs, see hashSlots): each one holds
	// Argon2.Memory KiB, so a burst of logins must queue instead of
	// multiplying memory use.
	hashSlots chan struct{}
	// callers keeps what Caller, LoginCallerRef and AccessCaller read until the next
	// commit to the store.
	callers callerCache
	// checks are the password checks under way, by a hash of login and
	// password, so simultaneous identical attempts share one
	// (Authenticate). checksMu guards the map and each check's waiters.
	checksMu sync.Mutex
	checks   map[string]*loginCheck
	// gates are the lockout subjects with attempts under way (attempt.go);
	// gatesMu guards the map and each gate's refs.
	gatesMu sync.Mutex
	gates   map[string]*gate
	// underWay counts the attempts reserved and not settled on any
	// gate, so that a remembered password (LoginCallerRef) looks for
	// them only while there are some.
	underWay atomic.Int64
	// hashWaiting counts sign-in checks waiting for a hash slot
	// (MaxHashQueue bounds it).
	hashWaiting atomic.Int64
	// log and metrics record failed logins and lockouts (metrics.go).
	log     *slog.Logger
	metrics *loginMetrics
	// dir is the directory servers' connection settings and bounds.
	dir *directoryState
	// twoStep counts refused two-step codes (twostep.go).
	twoStep *twoStepMetrics
	// memberBatches and deleteBatches are where large member changes
	// and group deletions start their batches (group.go, batchHint).
	memberBatches, deleteBatches batchHint
}

// New returns a Service over db. Zero fields of opts take their defaults.
func New(db kv.Store, opts Options) *Service {
	def := DefaultOptions()
	if opts.Now == nil {
		opts.Now = def.Now
	}
	if opts.AccessTTL <= 0 {
		opts.AccessTTL = def.AccessTTL
	}
	if opts.RefreshTTL <= 0 {
		opts.RefreshTTL = def.RefreshTTL
	}
	if opts.Argon2 == (Argon2Params{}) {
		opts.Argon2 = def.Argon2
	}
	if opts.Argon2.SaltLength == 0 {
		opts.Argon2.SaltLength = def.Argon2.SaltLength
	}
	if opts.Argon2.KeyLength == 0 {
		opts.Argon2.KeyLength = def.Argon2.KeyLength
	}
	if opts.Lockout.MaxFailures <= 0 {
		opts.Lockout.MaxFailures = def.Lockout.MaxFailures
	}
	if opts.Lockout.Window <= 0 {
		opts.Lockout.Window = def.Lockout.Window
	}
	if opts.Lockout.Duration <= 0 {
		opts.Lockout.Duration = def.Lockout.Duration
	}
	if opts.Lockout.AddressMaxFailures <= 0 {
		opts.Lockout.AddressMaxFailures = def.Lockout.AddressMaxFailures
	}
	if opts.Lockout.AddressWindow <= 0 {
		opts.Lockout.AddressWindow = def.Lockout.AddressWindow
	}
	if opts.Lockout.AddressDuration <= 0 {
		opts.Lockout.AddressDuration = def.Lockout.AddressDuration
	}
	if opts.MaxHashQueue <= 0 {
		opts.MaxHashQueue = def.MaxHashQueue
	}
	if opts.MinPasswordLength <= 0 {
		opts.MinPasswordLength = def.MinPasswordLength
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = def.MaxSessions
	}
	if opts.MaxMachines <= 0 {
		opts.MaxMachines = def.MaxMachines
	}
	opts.TwoStep = opts.TwoStep.withDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		log:       log,
		metrics:   newLoginMetrics(opts.Registerer),
		twoStep:   newTwoStepMetrics(opts.Registerer),
		db:        db,
		opts:      opts,
		codec:     newCodec(),
		hashSlots: make(chan struct{}, hashSlots(runtime.GOMAXPROCS(0))),
		callers:   newCallerCache(),
		checks:    map[string]*loginCheck{},
		dir:       newDirectoryState(opts.Directory),
		gates:     map[string]*gate{},
	}
}

func (s *Service) now() time.Time { return s.opts.Now().UTC() }

// get reads and decodes key; a missing key is notFound.
func (s *Service) get(tx kv.Txn, k []byte, v any, notFound error) error {
	b, err := tx.Get(k)
	if errors.Is(err, kv.ErrNotFound) {
		return notFound
	}
	if err != nil {
		return err
	}
	return s.codec.unmarshal(b, v)
}

// put encodes v and writes it under key.
func (s *Service) put(tx kv.Txn, k []byte, v any) error {
	b, err := s.codec.marshal(v)
	if err != nil {
		return err
	}
	return tx.Set(k, b)
}

// putTTL encodes v and writes it under key with a TTL (see s.ttl).
func (s *Service) putTTL(tx kv.Txn, k []byte, v any, ttl time.Duration) error {
	b, err := s.codec.marshal(v)
	if err != nil {
		return err
	}
	return tx.SetTTL(k, b, s.ttl(ttl))
}

// ttl turns a lifetime into a kv TTL that outlives it: Badger expires a
// key between ttl-1s and ttl after the write, so round up to whole seconds
// and add one. The exact deadline is enforced by the time stored in the value.
func (s *Service) ttl(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second) + time.Second
}

// exists reports whether key is present.
func exists(tx kv.Txn, k []byte) (bool, error) {
	_, err := tx.Get(k)
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// touch writes record k back as it is, in a transaction that adds a
// child of k's (a device password, mapping, backup or session of a
// machine): the deletion of k reads k, and the store detects a conflict
// on the keys a transaction read, not on the ranges it scanned, so a
// deletion that began before the child commits would miss it in its
// scan and commit over it, leaving the child of a record that is gone.
// Errors: kv.ErrNotFound when k is absent.
func touch(tx kv.Txn, k []byte) error {
	v, err := tx.Get(k)
	if err != nil {
		return err
	}
	return tx.Set(k, v)
}

func notFoundf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotFound}, args...)...)
}

// hashSlots is how many argon2 hashes run at once on cpus CPUs: all but
// one, so that a flood of sign-ins, which keeps every slot busy, always
// leaves a CPU to serve files with; one on a single CPU.
func hashSlots(cpus int) int { return max(1, cpus-1) }
