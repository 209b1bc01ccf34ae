package rest

import (
	"net/http"
	"testing"
)

// TestModifiedSince is the table of modified_since's queries: which dates
// it takes, and what it finds with them.
func TestModifiedSince(t *testing.T) {
	f := newFixture(t)
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("x"))
	for _, c := range []struct {
		query   string
		status  int
		code    string // the error, for a 400
		results int    // for a 200: 1 is f.txt
	}{
		// A date outside the years an int64 of nanoseconds holds (1678
		// to 2262) is still a valid YYYY-MM-DD. Before, its nanoseconds
		// wrapped around: 1000-01-01 asked for files modified after 2169
		// and answered none, 3000-01-01 asked for those after 1970 and
		// answered all of them.
		{"date=0001-01-01", 200, "", 1},
		{"date=1000-01-01", 200, "", 1},
		{"since=1677-12-31T23:59:59", 200, "", 1},
		{"date=1970-01-01", 200, "", 1},
		{"date=2262-12-31", 200, "", 0},
		{"date=3000-01-01", 200, "", 0},
		{"since=9999-12-31T23:59:59", 200, "", 0},

		// Spec 1.6 and 7.1 name one format, YYYY-MM-DDTHH:MM:SS.
		// time.Parse with that layout also takes a one-digit hour and a
		// fraction of a second after the seconds, which are not it.
		{"since=2024-01-02T3:04:05", 400, "invalid_datetime_format", 0},
		{"since=2024-01-02T03:04:05.123", 400, "invalid_datetime_format", 0},
		{"since=2024-01-02T03:04:05,5", 400, "invalid_datetime_format", 0},
		{"since=2024-01-02T03:04:05Z", 400, "invalid_datetime_format", 0},
		{"since=2024-01-02T03:04:05%2B00:00", 400, "invalid_datetime_format", 0},
		{"since=2024-01-02T03:04:05", 200, "", 1},
		{"date=2024-01-02T00:00:00", 400, "invalid_date_format", 0},
		{"date=2024-1-02", 400, "invalid_date_format", 0},
		{"date=%202024-01-02", 400, "invalid_date_format", 0},
	} {
		t.Run(c.query, func(t *testing.T) {
			st, body := f.get(f.at("/api/2/files/%d/modified_since?") + c.query)
			if c.status != http.StatusOK {
				wantError(t, st, body, c.status, c.code)
				return
			}
			var res struct {
				Results []fileJSON `json:"results"`
			}
			decode(t, body, &res)
			if st != http.StatusOK || len(res.Results) != c.results || (c.results == 1 && res.Results[0].ID != fj.ID) {
				t.Fatalf("%d %s, want %d results", st, body, c.results)
			}
		})
	}
}
