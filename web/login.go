package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"berth/account"
	"berth/share"
)

// Cookies of the sign-in for login_required links. Both are HttpOnly,
// Secure over TLS, and scoped to the pages.
const (
	// csrfCookie holds the token the sign-in and upload forms must repeat
	// (double submit): a cross-site form can neither read the cookie nor,
	// under SameSite=Strict, have it sent.
	csrfCookie = "berth_csrf"
	// sessionCookie holds the access token of the signed-in person,
	// scoped to the one link signed in to. SameSite=Lax: a link opened
	// from a mail is a cross-site GET and should find the session; every
	// POST needs the Strict CSRF token besides.
	sessionCookie = "berth_link"
)

// caller is the person signed in through the page's form, or nil. A
// person whose organization came to require two-step verification since
// is nil until enrolled, as at the sign-in (and as the API refuses the
// same token).
func (h *handler) caller(r *http.Request) *account.Caller {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" || h.opts.Accounts == nil {
		return nil
	}
	c, err := h.opts.Accounts.AccessCaller(r.Context(), ck.Value)
	if err != nil || h.opts.Accounts.TwoStepDue(r.Context(), &c) != nil {
		return nil
	}
	return &c
}

// csrfToken returns r's CSRF token, setting a new cookie when r has none.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 22 {
		return ck.Value
	}
	b := make([]byte, 18)
	rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: Prefix, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return tok
}

// loginPage answers a login_required link's page: 401 with the form.
func (h *handler) loginPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if h.opts.Accounts == nil {
		h.problem(w, r, status, "Sign-in required", "This share link is only for the people it was shared with.")
		return
	}
	h.render(w, r, status, "login.html", map[string]any{
		"Title": "Sign-in required", "Message": msg, "CSRF": csrfToken(w, r),
		"Action": Prefix + url.PathEscape(r.PathValue("hash")) + "/login",
	})
}

// sameOrigin reports whether r came from the pages' own origin, as far
// as the browser says: a second check besides the token. Sec-Fetch-Site
// is trusted where sent (browsers set it; a page cannot). Origin is
// compared otherwise, except "null": under Referrer-Policy: no-referrer
// a browser sends "null" for its own same-origin form posts.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// formFromPage reports whether r's parsed form was sent from the pages:
// its csrf field equals the CSRF cookie, and the browser does not say
// it came from elsewhere (sameOrigin).
func formFromPage(r *http.Request) bool {
	ck, err := r.Cookie(csrfCookie)
	return err == nil && sameOrigin(r) && len(ck.Value) >= 22 &&
		subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostForm.Get("csrf"))) == 1
}

// pageForm reads the form a page's sign-in or sign-out (what, to do it)
// posted, at most 16 KiB, and returns the link's hash; false when it
// answered r already: a form that does not read, one not sent from the
// pages (formFromPage), or a hash too short to be a link's.
func (h *handler) pageForm(w http.ResponseWriter, r *http.Request, what, do string) (string, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		h.problem(w, r, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return "", false
	}
	if !formFromPage(r) {
		h.problem(w, r, http.StatusForbidden, "Form expired", "The "+what+" form was not sent from this page. Open the link again and "+do+".")
		return "", false
	}
	hash := r.PathValue("hash")
	if len(hash) < 16 {
		h.fail(w, r, share.ErrNotFound)
		return "", false
	}
	return hash, true
}

// logout handles the sign-out form's POST /s/<hash>/logout: with the
// CSRF token, as every form of the pages (a sign-out forced from another
// site is a nuisance at least), it ends the session of the link's
// cookie, stored session included (account.SignOut), clears the cookie
// and goes back to the link's page. Without a session it only goes back.
// Whoever holds a session cookie may end that session, and nothing else.
func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	hash, ok := h.pageForm(w, r, "sign-out", "sign out")
	if !ok {
		return
	}
	page := Prefix + url.PathEscape(hash)
	if ck, err := r.Cookie(sessionCookie); err == nil && ck.Value != "" && h.opts.Accounts != nil {
		if err := h.opts.Accounts.SignOut(r.Context(), ck.Value); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: page, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, page, http.StatusSeeOther)
}

// login handles the sign-in form's POST /s/<hash>/login: the CSRF token
// must match its cookie; a right password of the link's creator or a
// subscriber sets the session cookie and goes back to the link's page.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	if h.opts.Accounts == nil {
		h.fail(w, r, share.ErrNotFound)
		return
	}
	hash, ok := h.pageForm(w, r, "sign-in", "sign in")
	if !ok {
		return
	}
	// The link must exist (and not be expired) before a password is tried.
	if _, err := h.opts.Share.OpenLink(r.Context(), hash, nil); err != nil && !errors.Is(err, share.ErrLoginRequired) {
		h.fail(w, r, err)
		return
	}
	p, err := h.opts.Accounts.Authenticate(r.Context(), r.PostForm.Get("username"), r.PostForm.Get("password"))
	if err == nil {
		// Two-step verification holds here as in the password grant:
		// the form's auth_code, or a code is sent and asked for.
		err = h.opts.Accounts.VerifyTwoStep(r.Context(), p, strings.TrimSpace(r.PostForm.Get("auth_code")))
	}
	if err != nil {
		h.loginPage(w, r, http.StatusUnauthorized, loginRefusal(err))
		return
	}
	// A sign-in from a form left open (another tab signed in since)
	// replaces the cookie's session: end it first, or it stayed stored
	// for its hour, counted toward the person's session cap, and past
	// the cap ended one of their devices' sessions in its stead.
	if ck, err := r.Cookie(sessionCookie); err == nil && ck.Value != "" {
		if err := h.opts.Accounts.SignOut(r.Context(), ck.Value); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	toks, err := h.opts.Accounts.IssuePageSession(r.Context(), p)
	if err != nil {
		h.loginPage(w, r, http.StatusUnauthorized, "Wrong username or password.")
		return
	}
	c, err := h.opts.Accounts.AccessCaller(r.Context(), toks.AccessToken)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.opts.Accounts.TwoStepDue(r.Context(), &c) != nil {
		// Not enrolled under require_two_step_auth: no session here.
		h.opts.Accounts.SignOut(r.Context(), toks.AccessToken)
		h.loginPage(w, r, http.StatusForbidden, "Your organization requires two-step verification: set it up in the berth app first, then sign in here.")
		return
	}
	if _, err := h.opts.Share.OpenLink(r.Context(), hash, &c); err != nil {
		// Signed in, but not one the link is shared with: keep no session.
		h.opts.Accounts.SignOut(r.Context(), toks.AccessToken)
		if errors.Is(err, share.ErrLoginRequired) {
			h.loginPage(w, r, http.StatusForbidden, "This share link is not shared with you.")
			return
		}
		h.fail(w, r, err)
		return
	}
	page := Prefix + url.PathEscape(hash)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: toks.AccessToken, Path: page,
		MaxAge: int(toks.ExpiresIn.Seconds()), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, page, http.StatusSeeOther)
}

// loginRefusal is what the sign-in form tells a person it refused.
func loginRefusal(err error) string {
	var te *account.TwoStepError
	switch {
	case errors.Is(err, account.ErrAccountLocked):
		return "Too many failed sign-ins: this account is locked for a while."
	case errors.Is(err, account.ErrTooManyAttempts), errors.Is(err, account.ErrBusy):
		return "Too many sign-ins from your network or at once: try again later."
	case errors.Is(err, account.ErrPasswordExpired):
		return "Your password has expired: change it in the berth app first."
	case errors.As(err, &te) && errors.Is(err, account.ErrMissingTOTP):
		switch te.Mode {
		case account.TwoStepEmail:
			return "This account uses two-step verification: a code was sent to your e-mail address. Enter your password again with the code."
		case account.TwoStepSMS:
			return "This account uses two-step verification: a code was sent to your phone. Enter your password again with the code."
		}
		return "This account uses two-step verification: enter your password again with the code from your authenticator app."
	case errors.Is(err, account.ErrInvalidTOTP):
		return "The two-step code is wrong, expired or already used."
	case errors.Is(err, account.ErrCodeNotSent):
		return "The two-step code could not be sent; try again later."
	}
	return "Wrong username or password."
}
