package rest

import (
	"net/http"
	"testing"
)

// TestModifiedSinceFarDates: a date outside the years an int64 of
// nanoseconds holds (1678 to 2262) is still a valid YYYY-MM-DD. Before,
// its nanoseconds wrapped around: 1000-01-01 asked for files modified
// after 2169 and answered none, 3000-01-01 asked for those after 1970 and
// answered all of them.
func TestModifiedSinceFarDates(t *testing.T) {
	f := newFixture(t)
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("x"))
	for _, c := range []struct {
		query string
		want  int
	}{
		{"date=0001-01-01", 1},
		{"date=1000-01-01", 1},
		{"since=1677-12-31T23:59:59", 1},
		{"date=1970-01-01", 1},
		{"date=2262-12-31", 0},
		{"date=3000-01-01", 0},
		{"since=9999-12-31T23:59:59", 0},
	} {
		t.Run(c.query, func(t *testing.T) {
			st, body := f.get(f.at("/api/2/files/%d/modified_since?" + c.query))
			var res struct {
				Results []fileJSON `json:"results"`
			}
			decode(t, body, &res)
			if st != http.StatusOK || len(res.Results) != c.want || (c.want == 1 && res.Results[0].ID != fj.ID) {
				t.Fatalf("%d %s, want %d results", st, body, c.want)
			}
		})
	}
}

// TestModifiedSinceStrictFormat: spec 1.6 and 7.1 name one format,
// YYYY-MM-DDTHH:MM:SS. time.Parse with that layout also takes a one-digit
// hour and a fraction of a second after the seconds, which are not it.
func TestModifiedSinceStrictFormat(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{
		"since=2024-01-02T3:04:05",
		"since=2024-01-02T03:04:05.123",
		"since=2024-01-02T03:04:05,5",
		"since=2024-01-02T03:04:05Z",
		"since=2024-01-02T03:04:05%2B00:00",
	} {
		st, body := f.get(f.at("/api/2/files/%d/modified_since?") + q)
		wantError(t, st, body, http.StatusBadRequest, "invalid_datetime_format")
	}
	st, body := f.get(f.at("/api/2/files/%d/modified_since?since=2024-01-02T03:04:05"))
	if st != http.StatusOK {
		t.Fatalf("well-formed since: %d %s", st, body)
	}
	for _, q := range []string{"date=2024-01-02T00:00:00", "date=2024-1-02", "date=%202024-01-02"} {
		st, body := f.get(f.at("/api/2/files/%d/modified_since?") + q)
		wantError(t, st, body, http.StatusBadRequest, "invalid_date_format")
	}
}
