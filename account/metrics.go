package account

import (
	"errors"
	"net/netip"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// The reasons of berth_login_failures_total: a fixed set, so a guesser
// cannot grow the metric's series.
const (
	reasonBadPassword  = "bad_password"   // a known login, a wrong password
	reasonUnknownLogin = "unknown_login"  // no person has that login
	reasonLocked       = "locked"         // refused unchecked: the login is locked
	reasonInactive     = "inactive"       // the right password, a disabled person or organization
	reasonThrottled    = "address_locked" // refused unchecked: the client address is throttled
	reasonBusy         = "busy"           // refused unchecked: the password-check queue is full
)

// loginMetrics count what an operator watches for: guessing, and the
// locks it brings.
type loginMetrics struct {
	failures     *prometheus.CounterVec
	lockouts     prometheus.Counter
	addrLockouts prometheus.Counter
	hashWaiting  prometheus.Gauge
}

func newLoginMetrics(reg prometheus.Registerer) *loginMetrics {
	m := &loginMetrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_login_failures_total",
			Help: "Refused password logins (OAuth password grant and WebDAV Basic), by reason: bad_password, unknown_login, locked, inactive, address_locked (the client address is throttled), busy (503: the password-check queue is full).",
		}, []string{"reason"}),
		lockouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_account_lockouts_total",
			Help: "Logins locked after too many failed attempts.",
		}),
		addrLockouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_address_lockouts_total",
			Help: "Client addresses throttled after too many failed sign-ins from them.",
		}),
		hashWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_password_checks_waiting",
			Help: "Sign-in password checks waiting for an argon2 slot (at most lockout.hash_queue).",
		}),
	}
	// Every reason is exported from the start, at zero, so a rate()
	// over it has a series before the first failure.
	for _, r := range []string{reasonBadPassword, reasonUnknownLogin, reasonLocked, reasonInactive, reasonThrottled, reasonBusy} {
		m.failures.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.failures, m.lockouts, m.addrLockouts, m.hashWaiting)
	}
	return m
}

// maxLoggedLogin is the most of a refused login a log line keeps: no
// username is longer than 255 bytes and no e-mail address than 254, so a
// longer login names nobody, and the client sent it (up to a form's or a
// header's limit, per attempt, locked or not) only to fill the log.
const maxLoggedLogin = 255

// loginAttrs is the login as a log line gives it: cut at maxLoggedLogin
// bytes (on a character boundary), with its full length beside it then.
func loginAttrs(login string) []any {
	if len(login) <= maxLoggedLogin {
		return []any{"login", login}
	}
	cut := maxLoggedLogin
	for cut > 0 && !utf8.RuneStart(login[cut]) {
		cut--
	}
	return []any{"login", login[:cut], "login_bytes", len(login)}
}

// loginFailed logs and counts a refused login, with the client's address
// where the front end gave one. The login is what the client sent (slog
// quotes it; loginAttrs cuts it short); the password is never logged.
func (s *Service) loginFailed(login string, addr netip.Addr, reason string, err error) {
	s.metrics.failures.WithLabelValues(reason).Inc()
	attrs := append(loginAttrs(login), "reason", reason)
	if addr.IsValid() {
		attrs = append(attrs, "addr", addr.String())
	}
	var le *LockedError
	if errors.As(err, &le) {
		attrs = append(attrs, "locked_until", le.Until)
	}
	s.log.Warn("login failed", attrs...)
}

// lockedOut logs and counts a login that one more failure locked.
func (s *Service) lockedOut(login string, err error) {
	s.metrics.lockouts.Inc()
	attrs := append(loginAttrs(login), "max_failures", s.opts.Lockout.MaxFailures)
	var le *LockedError
	if errors.As(err, &le) {
		attrs = append(attrs, "locked_until", le.Until)
	}
	s.log.Warn("account locked: too many failed logins", attrs...)
}

// addressRefused counts a sign-in refused because its address is
// throttled. It is logged at debug only: the throttle itself was logged
// at warn with the address (settledLog), and a flood would otherwise
// write a line per request.
func (s *Service) addressRefused(login string, addr netip.Addr, err error) {
	s.metrics.failures.WithLabelValues(reasonThrottled).Inc()
	s.log.Debug("login refused: the address is throttled", append(loginAttrs(login), "addr", addr.String(), "error", err)...)
}

// busy counts a sign-in refused because the password-check queue is full
// (503). Debug only, for the reason addressRefused gives.
func (s *Service) busy(login string, addr netip.Addr) {
	s.metrics.failures.WithLabelValues(reasonBusy).Inc()
	s.log.Debug("login refused: too many password checks waiting", append(loginAttrs(login), "addr", addr.String())...)
}

// settledLog logs and counts the locks a failed attempt brought: the
// account's (lockedOut) and the address's.
func (s *Service) settledLog(login string, addr netip.Addr, st settled) {
	if st.locking {
		s.lockedOut(login, st.accountLock)
	}
	if st.throttling {
		s.metrics.addrLockouts.Inc()
		s.log.Warn("address throttled: too many failed logins from it",
			"addr", addr.String(), "max_failures", s.opts.Lockout.AddressMaxFailures, "until", st.addrLock.Until)
	}
}
