package webdav

import (
	"encoding/xml"
	"strings"
	"testing"
)

// TestEscape: the plain fast path and the full one agree with
// encoding/xml on every kind of input.
func TestEscape(t *testing.T) {
	for _, s := range []string{"", "plain-name_1.txt", "/webdav/alice/a%20b/", "a&b", "<x>", `"q"`, "it's", "tab\there", "line\nbreak", "cr\r", "grüße ✓", "bad\xffutf8", "ctl\x01", "del\x7f"} {
		var want strings.Builder
		xml.EscapeText(&want, []byte(s))
		if got := escape(s); got != want.String() {
			t.Errorf("escape(%q) = %q, want %q", s, got, want.String())
		}
	}
}
