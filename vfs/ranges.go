package vfs

import (
	"strconv"
	"strings"
)

// unsatisfiableRange starts past the end of any file, so http.ServeContent
// answers it 416 with Content-Range bytes */size.
const unsatisfiableRange = "bytes=9223372036854775807-"

// MaxRanges is the most parts of a Range that ServableRange keeps. Every
// part out of order can make a file's reader fetch, verify and decode a
// chunk of up to 4 MiB again (1 to 5 ms); a request header of 1 MiB
// holds some 40,000 parts, which made one request of a few bytes cost
// the server a minute of CPU. Clients that read several ranges (PDF
// readers, media players) ask for a few at a time.
const MaxRanges = 100

// asciiSpace is what textproto.TrimString trims.
const asciiSpace = " \t\r\n"

// ServableRange returns the Range header value rng (RFC 9110 14.1.1) of a
// read of a file without its zero-length suffix ranges ("-0"), which no
// byte satisfies. http.ServeContent, which both front ends serve files
// with, would send each as a part that ends before it starts ("bytes
// 11-10/11") where RFC 9110 has such a range ignored while another is
// satisfiable, and the request answered 416 when none is. When nothing is
// left, it returns a range past the end of any file, which ServeContent
// answers 416 bytes */size after evaluating If-Range (a failed If-Range
// still gets the whole file, 200). Any other bytes range is returned as
// it is, for ServeContent to judge.
//
// A Range of another unit, or of none ("0-1"), is "": RFC 9110 14.2 has
// a server ignore a unit it does not understand, where ServeContent,
// which knows only the exact prefix "bytes=", answers 416; ServeContent
// reads an empty Range as none and sends the whole file. The unit is
// matched without case (RFC 9110 14.1), and written "bytes" for
// ServeContent.
//
// A Range of more than MaxRanges parts is "" too: the whole file is sent,
// as RFC 9110 14.2 allows for many small ranges, which are a sign of a
// broken client or a denial of service.
func ServableRange(rng string) string {
	unit, spec, ok := strings.Cut(rng, "=")
	if !ok || !strings.EqualFold(unit, "bytes") {
		return ""
	}
	var kept []string
	dropped := false
	parts := 0
	for _, part := range strings.Split(spec, ",") {
		// Trimmed as net/http's parseRange trims (textproto.TrimString).
		first, last, isRange := strings.Cut(part, "-")
		first, last = strings.Trim(first, asciiSpace), strings.Trim(last, asciiSpace)
		if isRange && first == "" && last != "" && last[0] != '-' {
			if n, err := strconv.ParseInt(last, 10, 64); err == nil && n == 0 {
				dropped = true
				continue
			}
		}
		kept = append(kept, part)
		// Blank parts are skipped by ServeContent, and cost nothing.
		if strings.Trim(part, asciiSpace) != "" {
			parts++
		}
	}
	switch {
	case parts > MaxRanges:
		return ""
	case !dropped:
		return "bytes=" + spec
	case strings.Trim(strings.Join(kept, ""), asciiSpace) == "":
		return unsatisfiableRange
	}
	return "bytes=" + strings.Join(kept, ",")
}
