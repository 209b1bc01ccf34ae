package rest

import (
	"strconv"
	"time"
)

// Wire formats of spec 1.6 and 1.7. Every handler formats dates and sizes
// through these helpers, so the API writes each kind of value one way.
const (
	// dateTimeLayout is a UTC date-time without zone suffix, YYYY-MM-DDTHH:MM:SS.
	dateTimeLayout = "2006-01-02T15:04:05"
	// dateLayout is a plain date, YYYY-MM-DD.
	dateLayout = "2006-01-02"
)

// formatDateTime writes t in UTC as YYYY-MM-DDTHH:MM:SS.
func formatDateTime(t time.Time) string { return t.UTC().Format(dateTimeLayout) }

// formatDate writes t in UTC as YYYY-MM-DD.
func formatDate(t time.Time) string { return t.UTC().Format(dateLayout) }

// parseDateTime reads a YYYY-MM-DDTHH:MM:SS date-time as UTC. A malformed
// value is ErrInvalidDatetimeFormat, whose description names the format.
func parseDateTime(s string) (time.Time, error) {
	t, ok := parseExactly(dateTimeLayout, s)
	if !ok {
		return time.Time{}, ErrInvalidDatetimeFormat
	}
	return t, nil
}

// parseDate reads a YYYY-MM-DD date as midnight UTC. A malformed value is
// ErrInvalidDateFormat.
func parseDate(s string) (time.Time, error) {
	t, ok := parseExactly(dateLayout, s)
	if !ok {
		return time.Time{}, ErrInvalidDateFormat
	}
	return t, nil
}

// parseExactly parses s in UTC as written in layout and nothing else:
// time.Parse also takes a one-digit hour for "15" and a fraction of a
// second after "05" that the layout does not show, so s must be what
// formatting the result gives back.
func parseExactly(layout, s string) (time.Time, bool) {
	t, err := time.ParseInLocation(layout, s, time.UTC)
	return t, err == nil && t.Format(layout) == s
}

// formatSize is the *_formatted form of a byte count (spec 1.7): whole bytes
// below 1000 ("999 B"), otherwise one decimal in the largest decimal unit
// that keeps the number below 1000 ("1.5 MB", "1.0 GB").
func formatSize(n int64) string {
	if n < 1000 && n > -1000 {
		return strconv.FormatInt(n, 10) + " B"
	}
	// Decimal (SI) units: what people see in file managers and on disk
	// labels; the spec does not show a choice.
	units := [...]string{"B", "KB", "MB", "GB", "TB", "PB", "EB"}
	v := float64(n)
	u := 0
	// 999.95 and up would print as "1000.0": move to the next unit first.
	for (v >= 999.95 || v <= -999.95) && u < len(units)-1 {
		v /= 1000
		u++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[u]
}
