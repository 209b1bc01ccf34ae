package account

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"berth/kv"
)

// codeBox is a CodeSender that keeps what it was handed.
type codeBox struct {
	mu   sync.Mutex
	msgs []CodeMessage
}

func (b *codeBox) SendCode(_ context.Context, m CodeMessage) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.msgs = append(b.msgs, m)
	return nil
}

func (b *codeBox) count() int { b.mu.Lock(); defer b.mu.Unlock(); return len(b.msgs) }

func (b *codeBox) last(t *testing.T) CodeMessage {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.msgs) == 0 {
		t.Fatal("no code was sent")
	}
	return b.msgs[len(b.msgs)-1]
}

// twoStepStart is on a TOTP step boundary plus 10 s, so that steps are
// easy to count.
var twoStepStart = time.Date(2026, 3, 1, 9, 0, 10, 0, time.UTC)

type twoStepEnv struct {
	s    *Service
	clk  *clock
	box  *codeBox
	org  Organization
	p    Person
	logs *bytes.Buffer
	reg  *prometheus.Registry
}

func newTwoStepEnv(t *testing.T) *twoStepEnv {
	t.Helper()
	e := &twoStepEnv{clk: &clock{t: twoStepStart}, box: &codeBox{}, logs: &bytes.Buffer{}, reg: prometheus.NewRegistry()}
	o := testOptions()
	o.Now = e.clk.Now
	o.Lockout = LockoutOptions{MaxFailures: 3, Window: time.Hour, Duration: time.Hour}
	o.TwoStep = TwoStepOptions{Sender: e.box, Email: true, SMS: true}
	o.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	o.Registerer = e.reg
	e.s = newService(t, o)
	e.org, e.p = fixture(t, e.s)
	return e
}

// code is the TOTP code of secret at the env's clock plus d.
func (e *twoStepEnv) code(t *testing.T, secret string, d time.Duration) string {
	t.Helper()
	c, err := totp.GenerateCode(secret, e.clk.Now().Add(d))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// enrollTOTP enrolls the person in the authenticator mode and returns
// the secret and the recovery codes.
func (e *twoStepEnv) enrollTOTP(t *testing.T) (string, []string) {
	t.Helper()
	ctx := context.Background()
	en, err := e.s.EnrollTwoStep(ctx, e.p.ID, TwoStepAuthenticator, "")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := e.s.ConfirmTwoStep(ctx, e.p.ID, e.code(t, en.Secret, 0))
	if err != nil {
		t.Fatal(err)
	}
	return en.Secret, rc
}

// clearTwoStepFailures forgets the person's wrong codes, so that a
// table of codes tests codes, not the lockout.
func clearTwoStepFailures(t *testing.T, s *Service, id uint64) {
	t.Helper()
	if err := s.db.Update(context.Background(), func(tx kv.Txn) error {
		return tx.Delete(keyBytes(pfxFail, twoStepSubject(id)))
	}); err != nil {
		t.Fatal(err)
	}
}

// wantTwoStep checks err is a *TwoStepError of sentinel and mode.
func wantTwoStep(t *testing.T, err, sentinel error, mode string) {
	t.Helper()
	var te *TwoStepError
	if !errors.Is(err, sentinel) || !errors.As(err, &te) || te.Mode != mode {
		t.Fatalf("got %v, want %v of mode %s", err, sentinel, mode)
	}
}

func TestTwoStepAuthenticator(t *testing.T) {
	ctx := context.Background()
	e := newTwoStepEnv(t)
	s, id := e.s, e.p.ID

	en, err := s.EnrollTwoStep(ctx, id, TwoStepAuthenticator, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(en.URI, "otpauth://totp/berth:") || !strings.Contains(en.URI, "secret="+en.Secret) {
		t.Errorf("URI %q", en.URI)
	}
	if img, err := png.Decode(bytes.NewReader(en.QRCode)); err != nil || img.Bounds().Dx() != qrSize {
		t.Errorf("QR code: %v", err)
	}
	// Not in force until confirmed.
	if mode, _ := s.TwoStepMode(ctx, id); mode != "" {
		t.Fatalf("mode before confirmation: %q", mode)
	}
	if err := s.VerifyTwoStep(ctx, e.p, ""); err != nil {
		t.Fatalf("sign-in before confirmation: %v", err)
	}
	if st, _ := s.TwoStepStatus(ctx, id); st.Pending != TwoStepAuthenticator || st.Mode != "" {
		t.Fatalf("status %+v", st)
	}
	if _, err := s.ConfirmTwoStep(ctx, id, "000000"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("wrong confirmation code: %v", err)
	}
	first := e.code(t, en.Secret, 0)
	rc, err := s.ConfirmTwoStep(ctx, id, first)
	if err != nil {
		t.Fatal(err)
	}
	if len(rc) != numRecoveryCodes {
		t.Fatalf("%d recovery codes", len(rc))
	}
	if mode, _ := s.TwoStepMode(ctx, id); mode != TwoStepAuthenticator {
		t.Fatalf("mode %q", mode)
	}

	steps := []struct {
		name    string
		advance time.Duration // clock moves first
		code    func() string
		want    error
	}{
		{"missing", 0, func() string { return "" }, ErrMissingTOTP},
		{"the confirmation's code is used", 0, func() string { return first }, ErrInvalidTOTP},
		{"next step", 30 * time.Second, func() string { return e.code(t, en.Secret, 0) }, nil},
		{"replayed in the same step", 5 * time.Second, func() string { return e.code(t, en.Secret, 0) }, ErrInvalidTOTP},
		{"one step ahead (clock skew)", 0, func() string { return e.code(t, en.Secret, 30*time.Second) }, nil},
		{"the step before the last accepted", 30 * time.Second, func() string { return e.code(t, en.Secret, -30*time.Second) }, ErrInvalidTOTP},
		{"expired step", 5 * time.Minute, func() string { return e.code(t, en.Secret, -3*time.Minute) }, ErrInvalidTOTP},
		{"right after refusals (counter not reached)", 0, func() string { return e.code(t, en.Secret, 0) }, nil},
		{"wrong", 30 * time.Second, func() string { return "123456" }, ErrInvalidTOTP},
		{"not six digits", 0, func() string { return "12345" }, ErrInvalidTOTP},
		{"previous step within skew, after a newer one: replay", 0, func() string { return e.code(t, en.Secret, -30*time.Second) }, ErrInvalidTOTP},
		{"current", 30 * time.Second, func() string { return e.code(t, en.Secret, 0) }, nil},
	}
	for _, st := range steps {
		e.clk.Add(st.advance)
		err := s.VerifyTwoStep(ctx, e.p, st.code())
		if st.want == nil {
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			continue
		}
		wantTwoStep(t, err, st.want, TwoStepAuthenticator)
		if errors.Is(err, ErrInvalidTOTP) {
			// Each refusal comes after a success here or is below
			// MaxFailures; unlock between rows so the table tests codes,
			// not the lockout.
			clearTwoStepFailures(t, s, id)
		}
	}
	got := testutil.ToFloat64(e.s.twoStep.failures.WithLabelValues(TwoStepAuthenticator, tsReplayed))
	if got != 4 {
		t.Errorf("replayed count %v, want 4", got)
	}
	if got := testutil.ToFloat64(e.s.twoStep.failures.WithLabelValues(TwoStepAuthenticator, tsExpired)); got != 1 {
		t.Errorf("expired count %v, want 1", got)
	}
	if !strings.Contains(e.logs.String(), "two-step code refused") || strings.Contains(e.logs.String(), first) {
		t.Errorf("log: %s", e.logs)
	}
}

func TestTwoStepSentCodes(t *testing.T) {
	for _, mode := range []string{TwoStepEmail, TwoStepSMS} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			e := newTwoStepEnv(t)
			s, id := e.s, e.p.ID
			phone, want := "", e.p.Email
			if mode == TwoStepSMS {
				phone, want = "+41 44 668-18-00", "+41446681800"
			}
			en, err := s.EnrollTwoStep(ctx, id, mode, phone)
			if err != nil {
				t.Fatal(err)
			}
			m := e.box.last(t)
			if m.Mode != mode || m.To != want || en.To != want || m.Purpose != CodeEnrollment || len(m.Code) != 6 {
				t.Fatalf("enrollment message %+v", m)
			}
			// Enrolling again at once sends nothing: whoever holds
			// their own password would otherwise have berth text or
			// mail any number or address as fast as it hashes (SMS
			// pumping), the authenticator mode between them included.
			again := func(want error) {
				t.Helper()
				n := e.box.count()
				if _, err := s.EnrollTwoStep(ctx, id, TwoStepAuthenticator, ""); err != nil {
					t.Fatal(err)
				}
				_, err := s.EnrollTwoStep(ctx, id, mode, "+41 44 668 18 01")
				if !errors.Is(err, want) || (want == nil) != (e.box.count() == n+1) {
					t.Fatalf("enrolling again: %v, %d sent before, %d now; want %v", err, n, e.box.count(), want)
				}
				if d, ok := RetryAfter(err); want != nil && (!ok || d <= 0) {
					t.Fatalf("enrolling again: Retry-After %v %v", d, ok)
				}
			}
			again(ErrCodeSentRecently)
			// After ResendAfter a new code goes; within an hour,
			// enrollmentCodes of them at most.
			for range enrollmentCodes - 1 {
				e.clk.Add(31 * time.Second)
				again(nil)
			}
			e.clk.Add(31 * time.Second)
			again(ErrCodeSentRecently)
			e.clk.Add(time.Hour)
			again(nil)
			e.clk.Add(31 * time.Second)
			if en, err = s.EnrollTwoStep(ctx, id, mode, phone); err != nil {
				t.Fatal(err)
			}
			// The code confirmed is the last sent: the counts
			// below start from it.
			m = e.box.last(t)
			e.box.mu.Lock()
			e.box.msgs = []CodeMessage{m}
			e.box.mu.Unlock()
			if _, err := s.ConfirmTwoStep(ctx, id, m.Code); err != nil {
				t.Fatal(err)
			}
			// Missing: a code is sent; asked again at once, none more.
			wantTwoStep(t, s.VerifyTwoStep(ctx, e.p, ""), ErrMissingTOTP, mode)
			m = e.box.last(t)
			if m.Purpose != CodeSignIn || m.To != want || e.box.count() != 2 {
				t.Fatalf("sign-in message %+v (%d sent)", m, e.box.count())
			}
			wantTwoStep(t, s.VerifyTwoStep(ctx, e.p, ""), ErrMissingTOTP, mode)
			if e.box.count() != 2 {
				t.Fatalf("resent within ResendAfter: %d sent", e.box.count())
			}
			// The enrollment's code is no sign-in code.
			wantTwoStep(t, s.VerifyTwoStep(ctx, e.p, e.box.msgs[0].Code), ErrInvalidTOTP, mode)
			if err := s.VerifyTwoStep(ctx, e.p, m.Code); err != nil {
				t.Fatalf("right code: %v", err)
			}
			wantTwoStep(t, s.VerifyTwoStep(ctx, e.p, m.Code), ErrInvalidTOTP, mode) // single use
			// Expired: a new code, the clock past its TTL.
			e.clk.Add(time.Minute)
			wantTwoStep(t, s.VerifyTwoStep(ctx, e.p, ""), ErrMissingTOTP, mode)
			old := e.box.last(t)
			if old.Code == m.Code && e.box.count() != 3 {
				t.Fatalf("no new code: %d sent", e.box.count())
			}
			e.clk.Add(10*time.Minute + time.Second)
			clearTwoStepFailures(t, s, id)
			wantTwoStep(t, s.VerifyTwoStep(ctx, e.p, old.Code), ErrInvalidTOTP, mode)
			for r, n := range map[string]float64{tsReplayed: 1, tsExpired: 1, tsWrong: 1} {
				if got := testutil.ToFloat64(s.twoStep.failures.WithLabelValues(mode, r)); got != n {
					t.Errorf("%s count %v, want %v", r, got, n)
				}
			}
		})
	}
}

func TestTwoStepRecoveryCodes(t *testing.T) {
	ctx := context.Background()
	e := newTwoStepEnv(t)
	_, rc := e.enrollTOTP(t)
	s := e.s
	// Any case, with or without the dash; once.
	if err := s.VerifyTwoStep(ctx, e.p, strings.ToUpper(strings.ReplaceAll(rc[3], "-", ""))); err != nil {
		t.Fatalf("recovery code: %v", err)
	}
	wantTwoStep(t, s.VerifyTwoStep(ctx, e.p, rc[3]), ErrInvalidTOTP, TwoStepAuthenticator)
	if st, _ := s.TwoStepStatus(ctx, e.p.ID); st.RecoveryCodesLeft != numRecoveryCodes-1 {
		t.Fatalf("left %d", st.RecoveryCodesLeft)
	}
	// New codes replace the old ones.
	fresh, err := s.NewRecoveryCodes(ctx, e.p.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantTwoStep(t, s.VerifyTwoStep(ctx, e.p, rc[4]), ErrInvalidTOTP, TwoStepAuthenticator)
	if err := s.VerifyTwoStep(ctx, e.p, fresh[0]); err != nil {
		t.Fatalf("new recovery code: %v", err)
	}
}

// TestTwoStepLockout: wrong codes lock the whole account, however many
// right passwords come between them, and Unlock ends it. From an address
// the right password made known (Lockout.KnownAddressTTL), where the
// account's lock does not keep the person out, the codes stay locked all
// the same: else each right password there bought MaxFailures more
// guesses at the code, with no wait.
func TestTwoStepLockout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addr  string // "": none, nothing counted per address
		known time.Duration
	}{
		{name: "without an address"},
		{name: "from an address the password made known", addr: "203.0.113.7", known: 30 * 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.addr != "" {
				ctx = WithClientAddr(ctx, netip.MustParseAddr(tc.addr))
			}
			e := newTwoStepEnv(t)
			e.s.opts.Lockout.KnownAddressTTL = tc.known
			secret, _ := e.enrollTOTP(t)
			s := e.s
			for i := 1; i <= 3; i++ {
				if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
					t.Fatalf("password %d: %v", i, err)
				}
				err := s.VerifyTwoStep(ctx, e.p, "000000")
				if i < 3 {
					wantTwoStep(t, err, ErrInvalidTOTP, TwoStepAuthenticator)
					continue
				}
				var le *LockedError
				if !errors.As(err, &le) || !errors.Is(err, ErrAccountLocked) {
					t.Fatalf("third wrong code: %v", err)
				}
			}
			// The password is refused unchecked, where the
			// address is not known; the codes are refused
			// everywhere, a right one too.
			if _, err := s.Authenticate(ctx, "alice", pw); tc.known == 0 && !errors.Is(err, ErrAccountLocked) {
				t.Fatalf("password while locked: %v", err)
			}
			for i := 0; i < 3; i++ {
				if err := s.VerifyTwoStep(ctx, e.p, "000000"); !errors.Is(err, ErrAccountLocked) {
					t.Fatalf("wrong code %d while locked: %v", i+1, err)
				}
			}
			e.clk.Add(30 * time.Second)
			if err := s.VerifyTwoStep(ctx, e.p, e.code(t, secret, 0)); !errors.Is(err, ErrAccountLocked) {
				t.Fatalf("code while locked: %v", err)
			}
			if n := testutil.ToFloat64(s.metrics.lockouts); n != 1 {
				t.Errorf("lockouts %v", n)
			}
			if err := s.Unlock(ctx, e.p.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
				t.Fatalf("after unlock: %v", err)
			}
			e.clk.Add(30 * time.Second)
			if err := s.VerifyTwoStep(ctx, e.p, e.code(t, secret, 0)); err != nil {
				t.Fatalf("code after unlock: %v", err)
			}
		})
	}
}

// TestTwoStepRequiredAndReset: require_two_step_auth keeps a person who
// has not enrolled out of everything but enrollment (TwoStepDue), and
// stops them turning it off; an administrator's reset removes it.
func TestTwoStepRequiredAndReset(t *testing.T) {
	ctx := context.Background()
	e := newTwoStepEnv(t)
	s := e.s
	if _, err := s.UpdatePolicy(ctx, e.org.ID, func(p *Policy) error { p.RequireTwoStepAuth = true; return nil }); err != nil {
		t.Fatal(err)
	}
	toks, err := s.IssueTokens(ctx, e.p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	caller := func() *Caller {
		c, err := s.AccessCaller(ctx, toks.AccessToken)
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	if err := s.TwoStepDue(ctx, caller()); !errors.Is(err, ErrTwoStepRequired) {
		t.Fatalf("due before enrolling: %v", err)
	}
	e.enrollTOTP(t)
	if err := s.TwoStepDue(ctx, caller()); err != nil {
		t.Fatalf("due after enrolling: %v", err)
	}
	if err := s.DisableTwoStep(ctx, e.p.ID); !errors.Is(err, ErrTwoStepRequired) {
		t.Fatalf("disable under the policy: %v", err)
	}
	if err := s.ResetTwoStep(ctx, e.p.ID); err != nil {
		t.Fatal(err)
	}
	if mode, _ := s.TwoStepMode(ctx, e.p.ID); mode != "" {
		t.Fatalf("mode after reset %q", mode)
	}
	if err := s.VerifyTwoStep(ctx, e.p, ""); err != nil {
		t.Fatalf("sign-in after reset: %v", err)
	}
	if err := s.TwoStepDue(ctx, caller()); !errors.Is(err, ErrTwoStepRequired) {
		t.Fatalf("due after reset: %v", err)
	}
	// Without the policy, the person turns it off themself.
	if _, err := s.UpdatePolicy(ctx, e.org.ID, func(p *Policy) error { p.RequireTwoStepAuth = false; return nil }); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(time.Minute)
	e.enrollTOTP(t)
	if err := s.DisableTwoStep(ctx, e.p.ID); err != nil {
		t.Fatal(err)
	}
	if mode, _ := s.TwoStepMode(ctx, e.p.ID); mode != "" {
		t.Fatalf("mode after disable %q", mode)
	}
}

func TestTwoStepEnrollErrors(t *testing.T) {
	ctx := context.Background()
	e := newTwoStepEnv(t)
	noSender := newService(t, testOptions())
	_, p2 := fixture(t, noSender)
	for _, c := range []struct {
		name        string
		s           *Service
		id          uint64
		mode, phone string
		field       string
	}{
		{"unknown mode", e.s, e.p.ID, "carrier-pigeon", "", "mode"},
		{"no mode", e.s, e.p.ID, "", "", "mode"},
		{"sms without a number", e.s, e.p.ID, TwoStepSMS, "", "phone"},
		{"sms, a national number", e.s, e.p.ID, TwoStepSMS, "044 668 18 00", "phone"},
		{"sms, letters", e.s, e.p.ID, TwoStepSMS, "+41 44 CALL ME", "phone"},
		{"email without a sender", noSender, p2.ID, TwoStepEmail, "", "mode"},
		{"sms without a sender", noSender, p2.ID, TwoStepSMS, "+41446681800", "mode"},
	} {
		_, err := c.s.EnrollTwoStep(ctx, c.id, c.mode, c.phone)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want a %s error", c.name, err, c.field)
		}
	}
	if _, err := e.s.EnrollTwoStep(ctx, 9999, TwoStepAuthenticator, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown person: %v", err)
	}
	if _, err := e.s.ConfirmTwoStep(ctx, e.p.ID, "123456"); !errors.Is(err, ErrInvalid) {
		t.Errorf("confirm without enrollment: %v", err)
	}
	// Too many wrong confirmation codes end the enrollment.
	en, err := e.s.EnrollTwoStep(ctx, e.p.ID, TwoStepAuthenticator, "")
	if err != nil {
		t.Fatal(err)
	}
	for range maxConfirmTries {
		e.s.ConfirmTwoStep(ctx, e.p.ID, "000000")
	}
	if _, err := e.s.ConfirmTwoStep(ctx, e.p.ID, e.code(t, en.Secret, 0)); !errors.Is(err, ErrInvalid) {
		t.Errorf("confirm after too many tries: %v", err)
	}
}

// gatedSender fails every code sent to failTo, once released; others go
// to box.
type gatedSender struct {
	box     *codeBox
	failTo  string
	in      chan struct{}
	release chan struct{}
}

func (g *gatedSender) SendCode(ctx context.Context, m CodeMessage) error {
	if m.To != g.failTo {
		return g.box.SendCode(ctx, m)
	}
	g.in <- struct{}{}
	<-g.release
	return errors.New("the gateway refused the number")
}

// TestTwoStepEnrollCodeNotSent: a code that could not be sent does not
// count against the person's bounds, and takes back only itself. Before,
// a send that failed put back the count as it was before it, erasing
// every code sent meanwhile: a send kept failing slowly, alongside,
// reopened the bound of one code per 30 s and five an hour.
func TestTwoStepEnrollCodeNotSent(t *testing.T) {
	ctx := context.Background()
	e := newTwoStepEnv(t)
	const bad = "+41446681899"
	g := &gatedSender{box: e.box, failTo: bad, in: make(chan struct{}), release: make(chan struct{})}
	e.s.opts.TwoStep.Sender = g
	failed := make(chan error, 1)
	go func() {
		_, err := e.s.EnrollTwoStep(ctx, e.p.ID, TwoStepSMS, bad)
		failed <- err
	}()
	<-g.in // counted, in flight
	e.clk.Add(31 * time.Second)
	if _, err := e.s.EnrollTwoStep(ctx, e.p.ID, TwoStepSMS, "+41446681801"); err != nil {
		t.Fatalf("a code 31 s after the first: %v", err)
	}
	close(g.release)
	if err := <-failed; !errors.Is(err, ErrCodeNotSent) {
		t.Fatalf("the failed send: %v", err)
	}
	e.clk.Add(time.Second)
	if _, err := e.s.EnrollTwoStep(ctx, e.p.ID, TwoStepSMS, "+41446681801"); !errors.Is(err, ErrCodeSentRecently) {
		t.Fatalf("a code 1 s after one sent, once another failed: %v, want ErrCodeSentRecently", err)
	}
	// The failed one is not counted: four more go within the hour, and
	// no more.
	for i := range enrollmentCodes {
		e.clk.Add(31 * time.Second)
		_, err := e.s.EnrollTwoStep(ctx, e.p.ID, TwoStepSMS, "+41446681801")
		if want := i < enrollmentCodes-1; want != (err == nil) {
			t.Fatalf("code %d of the hour: %v", i+2, err)
		}
	}
}

// BenchmarkTwoStepVerify is the second step of a sign-in with a TOTP code
// (wrong codes, so that every iteration does the whole check and the
// lockout's writes; the lockout is set out of reach).
func BenchmarkTwoStepVerify(b *testing.B) {
	ctx := context.Background()
	o := testOptions()
	o.Lockout = LockoutOptions{MaxFailures: 1 << 30, Window: time.Hour, Duration: time.Hour}
	s := newService(b, o)
	_, p := fixture(b, s)
	en, err := s.EnrollTwoStep(ctx, p.ID, TwoStepAuthenticator, "")
	if err != nil {
		b.Fatal(err)
	}
	code, _ := totp.GenerateCode(en.Secret, time.Now())
	if _, err := s.ConfirmTwoStep(ctx, p.ID, code); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := s.VerifyTwoStep(ctx, p, "000000"); !errors.Is(err, ErrInvalidTOTP) {
			b.Fatal(err)
		}
	}
}

// failingSender is a CodeSender that refuses every code to one number,
// after running during (an enrollment made at once, between counting
// the refused code and taking it back), and hands the others to box.
type failingSender struct {
	box    *codeBox
	failTo string
	during func()
}

var errRefused = errors.New("test: the gateway refuses the number")

func (f *failingSender) SendCode(ctx context.Context, m CodeMessage) error {
	if m.To != f.failTo {
		return f.box.SendCode(ctx, m)
	}
	if f.during != nil {
		f.during()
	}
	return errRefused
}

// A code that is not sent does not count against the bounds of the
// enrollment codes, while every code sent does, whatever was sent
// between the count and the failure. Before, the count as it was before
// the failed code was put back whole, over the codes enrollments made
// at once had sent meanwhile: one whose codes failed on purpose (a
// number the gateway refuses) let the others send past the bounds.
func TestTwoStepUnsentCodes(t *testing.T) {
	const refused, good, other = "+41446681899", "+41446681800", "+41446681801"
	rows := []struct {
		name string
		// during: an enrollment to good, sent while the refused code
		// is on its way.
		during bool
		// then is what an enrollment to other gets right after.
		then error
	}{
		{"a code refused alone is not counted", false, nil},
		{"a code sent while another is refused stays counted", true, ErrCodeSentRecently},
	}
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := &clock{t: twoStepStart}
			snd := &failingSender{box: &codeBox{}, failTo: refused}
			o := testOptions()
			o.Now = clk.Now
			o.TwoStep = TwoStepOptions{Sender: snd, SMS: true}
			s := newService(t, o)
			_, p := fixture(t, s)
			if tt.during {
				snd.during = func() {
					clk.Add(31 * time.Second)
					if _, err := s.EnrollTwoStep(ctx, p.ID, TwoStepSMS, good); err != nil {
						t.Errorf("the enrollment between: %v", err)
					}
				}
			}
			if _, err := s.EnrollTwoStep(ctx, p.ID, TwoStepSMS, refused); !errors.Is(err, ErrCodeNotSent) {
				t.Fatalf("the refused code: %v", err)
			}
			if _, err := s.EnrollTwoStep(ctx, p.ID, TwoStepSMS, other); !errors.Is(err, tt.then) {
				t.Errorf("an enrollment right after: %v, want %v", err, tt.then)
			}
		})
	}
}
