package webdav

import (
	"crypto/sha256"
	"time"
)

// JudgesTags is judgesTags, for TestIf's row on which conditions read a
// collection's listing.
var JudgesTags = judgesTags

// Escape lets the external tests (xml_test.go) check the XML escaping of
// answers against encoding/xml.
var Escape = escape

// PlainPath and CleanPath are davPath's two ways, for TestPlainPath.
var PlainPath, CleanPath = plainPath, cleanPath

// MaxPathDepth is maxPathDepth.
const MaxPathDepth = maxPathDepth

// SetCredentialClock sets the clock of h's remembered Basic logins.
func SetCredentialClock(h *Handler, now func() time.Time) {
	h.creds.mu.Lock()
	defer h.creds.mu.Unlock()
	h.creds.now = now
}

// CredentialChecked says when h last checked login and password in full
// (account.Authenticate), while it remembers them (ok).
func CredentialChecked(h *Handler, login, password string) (time.Time, bool) {
	h.creds.mu.Lock()
	defer h.creds.mu.Unlock()
	e, ok := h.creds.m[sha256.Sum256([]byte(login+"\x00"+password))]
	return e.checked, ok && !h.creds.now().After(e.expires)
}

// PlainMoveDecided has h run f each time a request works out whether a
// MOVE is one transaction (plainMove), which it does once a request.
func PlainMoveDecided(h *Handler, f func()) { h.plainMoveDecided = f }

// CopiedForMove has h run f in a MOVE into another root once the copy is
// in place, before the source is deleted.
func CopiedForMove(h *Handler, f func()) { h.copiedForMove = f }
