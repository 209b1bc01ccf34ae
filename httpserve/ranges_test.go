package httpserve_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"berth/httpserve"
)

// TestRangeParse: berth's one reading of a Range, as each of its users
// gets it: the header http.ServeContent reads (ServableRange: "" for
// none, the whole contents; unsatisfiable for a Range refused 416),
// whether a share link counts the answer as sending the first byte
// (Sends), and the bytes it charges of 1000 (RangeBytes). Hostile rows
// first: each front end's Range table (berthtest.RangeCases) checks the
// answers these lead to.
func TestRangeParse(t *testing.T) {
	const (
		none  = "bytes=9223372036854775807-" // refused: 416 bytes */size
		max   = "9223372036854775807"
		whole = "" // the whole contents, 200
	)
	many := func(part string, n int) string { return "bytes=" + strings.Repeat(part+",", n-1) + part }
	for _, tc := range []struct {
		name, in string
		want     string // the Range ServeContent gets
		sends    bool
		start    bool  // Sends's fromStart, when sends
		bytes    int64 // RangeBytes of 1000 bytes
	}{
		// Numbers past an int64 mean what they say of any contents: a
		// first position past the end, a last one or a suffix to it.
		// strconv failed on them, and ServeContent refused them without
		// the Content-Range a 416 carries.
		{"overflow: first position", "bytes=99999999999999999999-", "bytes=" + max + "-", true, false, 0},
		{"overflow: last position", "bytes=10-99999999999999999999", "bytes=10-" + max, true, false, 990},
		{"overflow: suffix", "bytes=-99999999999999999999", "bytes=-" + max, true, true, 1000},
		{"overflow: both", "bytes=99999999999999999999-99999999999999999999", "bytes=" + max + "-" + max, true, false, 0},
		{"overflow: the largest int64 itself", "bytes=" + max + "-", "bytes=" + max + "-", true, false, 0},
		{"overflow: a digit past it", "bytes=0-" + max + "0", "bytes=0-" + max, true, true, 1000},
		{"overflow: still digits only", "bytes=99999999999999999999x-", none, false, false, 0},

		// More than MaxRanges parts: the whole contents, read no further.
		{"many: 10,000 parts", many("1-1", 10_000), whole, true, true, 1000},
		{"many: MaxRanges parts", many("1-1", httpserve.MaxRanges), many("1-1", httpserve.MaxRanges), true, false, 100},
		{"many: MaxRanges+1 parts", many("1-1", httpserve.MaxRanges+1), whole, true, true, 1000},
		{"many: invalid parts count too", many("x", httpserve.MaxRanges+1), whole, true, true, 1000},
		{"many: 10,000 zero suffixes do not count", many("-0", 10_000), none, false, false, 0},
		{"many: blank parts do not count", "bytes=" + strings.Repeat(",", 10_000) + "1-1", "bytes=1-1", true, false, 1},
		{"many: zero suffixes beside MaxRanges parts", many("1-1", httpserve.MaxRanges) + ",-0, ,", many("1-1", httpserve.MaxRanges), true, false, 100},

		// Overlapping parts are served as asked; ServeContent sends the
		// whole contents once they add up past it.
		{"overlap: two", "bytes=10-19,15-24", "bytes=10-19,15-24", true, false, 20},
		{"overlap: the same part twice", "bytes=1-,1-", "bytes=1-,1-", true, false, 1000},
		{"overlap: backwards", "bytes=500-599,0-9", "bytes=500-599,0-9", true, true, 110},

		// A zero-length suffix is satisfied by no byte: dropped beside
		// another part, refused alone.
		{"zero suffix", "bytes=-0", none, false, false, 0},
		{"zero suffix, spelled -00", "bytes= -00 ", none, false, false, 0},
		{"zero suffix, spelled -+0", "bytes=-+0", none, false, false, 0},
		{"zero suffixes only", "bytes=-0,-0", none, false, false, 0},
		{"zero suffix and a blank", "bytes=-0,", none, false, false, 0},
		{"zero suffix after a part", "bytes=0-1,-0", "bytes=0-1", true, true, 2},
		{"zero suffix before a part", "bytes=-0,0-1", "bytes=0-1", true, true, 2},
		{"zero suffix between parts", "bytes=0-1, -0 ,4-5", "bytes=0-1,4-5", true, true, 4},
		{"zero suffix beside a suffix", "bytes=-0,-10", "bytes=-10", true, true, 10},
		{"zero suffix beside no range", "bytes=-0,x", none, false, false, 0},

		// Empty and blank.
		{"empty", "", whole, true, true, 1000},
		{"blank", "   ", whole, true, true, 1000},
		{"no parts", "bytes=", whole, true, true, 1000},
		{"blank parts", "bytes= , ,", whole, true, true, 1000},

		// Units: bytes, without case; anything else, or none, is ignored.
		{"unit: Bytes", "Bytes=0-1", "bytes=0-1", true, true, 2},
		{"unit: BYTES, zero suffix dropped", "BYTES=-0,-2", "bytes=-2", true, true, 2},
		{"unit: another", "items=0-1", whole, true, true, 1000},
		{"unit: another's zero suffix", "items=-0", whole, true, true, 1000},
		{"unit: none", "0-1", whole, true, true, 1000},
		{"unit: spaced from its =", "bytes =0-1", whole, true, true, 1000},

		// White space around parts and positions, as net/http trims it.
		{"white space", "bytes= 1 - 2 ,\t4-\t", "bytes=1-2,4-", true, false, 998},
		{"white space around the header", " bytes=1-2 ", "bytes=1-2", true, false, 2},
		{"white space inside a number", "bytes=1 0-20", none, false, false, 0},

		// Parts that are no range refuse the Range (RFC 9110 14.2).
		{"no dash", "bytes=5", none, false, false, 0},
		{"last before first", "bytes=10-5", none, false, false, 0},
		{"negative suffix", "bytes=--5", none, false, false, 0},
		{"negative last", "bytes=0--5", none, false, false, 0},
		{"two dashes", "bytes=0-1-2", none, false, false, 0},
		{"empty suffix", "bytes=-", none, false, false, 0},
		{"hex", "bytes=0x10-", none, false, false, 0},
		{"a sign alone", "bytes=+-5", none, false, false, 0},
		{"not ASCII", "bytes=１-２", none, false, false, 0},
		{"one bad part refuses the rest", "bytes=0-1,x,4-5", none, false, false, 0},

		// What works, as written.
		{"first byte", "bytes=0-0", "bytes=0-0", true, true, 1},
		{"open", "bytes=10-", "bytes=10-", true, false, 990},
		{"suffix", "bytes=-5", "bytes=-5", true, true, 5},
		{"suffix longer than the contents", "bytes=-5000", "bytes=-5000", true, true, 1000},
		{"past the end", "bytes=1000-", "bytes=1000-", true, false, 0},
		{"clipped", "bytes=990-2000", "bytes=990-2000", true, false, 10},
		{"a sign, as net/http reads it", "bytes=+10-+19", "bytes=10-19", true, false, 10},
		{"+0 is 0", "bytes=+0-", "bytes=0-", true, true, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Range", tc.in)
			sends, start := httpserve.Sends(r, `"e"`, time.Time{})
			if sends != tc.sends || sends && start != tc.start {
				t.Errorf("Sends = %v, %v; want %v, %v", sends, start, tc.sends, tc.start)
			}
			if got := httpserve.RangeBytes(r, 1000); got != tc.bytes && tc.sends {
				t.Errorf("RangeBytes = %d, want %d", got, tc.bytes)
			}
			httpserve.ServableRange(r)
			if got := r.Header.Get("Range"); got != tc.want {
				t.Errorf("ServableRange: %.80q, want %.80q", got, tc.want)
			}
			if _, ok := r.Header["Range"]; ok && tc.want == whole && tc.in != "" {
				t.Errorf("ServableRange left a Range of nothing")
			}
		})
	}
}

// TestRangeParseBounded: a hostile Range costs no more than its first
// MaxRanges+1 parts: a megabyte of parts, or of zero-length suffixes
// (which do not count), allocates what MaxRanges parts do at most.
func TestRangeParseBounded(t *testing.T) {
	for _, tc := range []struct {
		name, rng string
		allocs    float64
	}{
		{"a megabyte of parts", "bytes=" + strings.Repeat("1-1,", 1<<18), 10},
		{"a megabyte of zero suffixes", "bytes=" + strings.Repeat("-0,", 1<<18), 0},
		{"a megabyte of blank parts", "bytes=" + strings.Repeat(", ", 1<<19), 0},
		{"a megabyte of digits", "bytes=0-" + strings.Repeat("9", 1<<20), 1},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Range", tc.rng)
		if n := testing.AllocsPerRun(3, func() { httpserve.RangeBytes(r, 1000) }); n > tc.allocs {
			t.Errorf("%s: %v allocations, want at most %v", tc.name, n, tc.allocs)
		}
	}
}

// TestIfRange: an If-Range read as http.ServeContent reads it decides
// between a resumption and the whole contents alike for ServableRange
// (a date sends it whole) and for Sends (anything but the ETag, compared
// strongly, sends it from the start).
func TestIfRange(t *testing.T) {
	date := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(http.TimeFormat)
	for _, tc := range []struct {
		name, ifRange string
		kept          bool // the Range is handed to ServeContent
		resumes       bool // Sends: not from the start
	}{
		{"none", "", true, true},
		{"the ETag", `"e"`, true, true},
		{"the ETag, then more", `"e" x`, true, true},
		{"the ETag, spaced", ` "e" `, true, true},
		{"the weak ETag", `W/"e"`, true, false},
		{"another ETag", `"f"`, true, false},
		{"a date", date, false, false},
		{"neither", "yesterday", false, false},
		{"an unterminated tag", `"e`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Range", "bytes=10-")
			if tc.ifRange != "" {
				r.Header.Set("If-Range", tc.ifRange)
			}
			if _, start := httpserve.Sends(r, `"e"`, time.Time{}); start == tc.resumes {
				t.Errorf("Sends: fromStart %v, want %v", start, !tc.resumes)
			}
			httpserve.ServableRange(r)
			if kept := r.Header.Get("Range") != ""; kept != tc.kept {
				t.Errorf("ServableRange kept the Range: %v, want %v", kept, tc.kept)
			}
		})
	}
}

// BenchmarkServableRange: the Range of a mount's read (one part), and of
// a multi-range read, as every ranged GET rewrites it for
// http.ServeContent.
func BenchmarkServableRange(b *testing.B) {
	for _, bc := range []struct{ name, rng string }{
		{"one part", "bytes=1048576-2097151"},
		{"ten parts", "bytes=0-99,200-299,400-499,600-699,800-899,1000-1099,1200-1299,1400-1499,1600-1699,1800-1899"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			b.ReportAllocs()
			for b.Loop() {
				r.Header["Range"] = []string{bc.rng}
				httpserve.ServableRange(r)
			}
		})
	}
}
