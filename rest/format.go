package rest

import (
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
