package webdav

import (
	"reflect"
	"strings"
	"testing"
)

// formatIf writes lists as an If header, the form parseIf reads.
func formatIf(lists []ifList) string {
	var b strings.Builder
	for _, l := range lists {
		if l.resource != "" {
			b.WriteString("<" + l.resource + "> ")
		}
		b.WriteString("(")
		for i, c := range l.conds {
			if i > 0 {
				b.WriteByte(' ')
			}
			if c.not {
				b.WriteString("Not ")
			}
			if c.etag != "" || c.token == "" {
				b.WriteString("[" + c.etag + "]")
			} else {
				b.WriteString("<" + c.token + ">")
			}
		}
		b.WriteString(") ")
	}
	return b.String()
}

// FuzzParseIf reads arbitrary If headers (RFC 4918 10.4) and checks that
// what parseIf accepts holds at most maxIfConditions conditions, each a
// state token or an entity tag, and reads back the same once written.
func FuzzParseIf(f *testing.F) {
	for _, s := range []string{
		"(<urn:uuid:1>)",
		`(["r1"])`,
		`(Not <DAV:no-lock>) (["r1"] <urn:x>)`,
		`<https://h/webdav/a> (<urn:uuid:1>) <https://h/webdav/b> (Not ["W/r2"])`,
		"(Not)", "(<a>", "(", "", "()", "<a>", "(<a>) x", "(not<a>)", "(NOT[x])", "(<>)", "([])",
		"<> (<a>)", "(<a>)<b>", strings.Repeat("(<a>)", 257), "\t(<a>)\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lists, err := parseIf(s)
		if err != nil {
			return
		}
		n := 0
		for _, l := range lists {
			for _, c := range l.conds {
				if c.token != "" && c.etag != "" {
					t.Fatalf("%q: a condition with a token and an etag: %+v", s, c)
				}
				n++
			}
		}
		if n == 0 || n > maxIfConditions {
			t.Fatalf("%q: %d conditions", s, n)
		}
		back, err := parseIf(formatIf(lists))
		if err != nil || !reflect.DeepEqual(back, lists) {
			t.Fatalf("%q reads as %+v, written %q, read back as %+v (%v)", s, lists, formatIf(lists), back, err)
		}
	})
}
