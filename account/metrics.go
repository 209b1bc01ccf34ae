package account

import (
	"errors"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// The reasons of berth_login_failures_total: a fixed set, so a guesser
// cannot grow the metric's series.
const (
	reasonBadPassword  = "bad_password"  // a known login, a wrong password
	reasonUnknownLogin = "unknown_login" // no person has that login
	reasonLocked       = "locked"        // refused unchecked: the login is locked
	reasonInactive     = "inactive"      // the right password, a disabled person or organization
)

// loginMetrics count what an operator watches for: guessing, and the
// locks it brings.
type loginMetrics struct {
	failures *prometheus.CounterVec
	lockouts prometheus.Counter
}

func newLoginMetrics(reg prometheus.Registerer) *loginMetrics {
	m := &loginMetrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_login_failures_total",
			Help: "Refused password logins (OAuth password grant and WebDAV Basic), by reason: bad_password, unknown_login, locked, inactive.",
		}, []string{"reason"}),
		lockouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_account_lockouts_total",
			Help: "Logins locked after too many failed attempts.",
		}),
	}
	// Every reason is exported from the start, at zero, so a rate()
	// over it has a series before the first failure.
	for _, r := range []string{reasonBadPassword, reasonUnknownLogin, reasonLocked, reasonInactive} {
		m.failures.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.failures, m.lockouts)
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

// loginFailed logs and counts a refused login. The login is what the
// client sent (slog quotes it; loginAttrs cuts it short); the password is
// never logged.
func (s *Service) loginFailed(login, reason string, err error) {
	s.metrics.failures.WithLabelValues(reason).Inc()
	attrs := append(loginAttrs(login), "reason", reason)
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
