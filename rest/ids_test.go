package rest

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestIDsWithLeadingZeros: an id is written as JSON writes an integer, so
// one spelling names one item. Leading zeros were read as the number
// while that stayed within 19 characters and refused past it, so "07"
// named item 7, and so did "0000000000000000007", but "00000000000000000007"
// named nothing.
func TestIDsWithLeadingZeros(t *testing.T) {
	f := newFixture(t)
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("x"))
	pad := func(id uint64, n int) string { return strings.Repeat("0", n) + fmt.Sprint(id) }
	for _, p := range []string{
		fmt.Sprintf("/api/2/files/%s", pad(f.root.ID, 1)),
		f.at("/api/2/files/%d/%s", pad(fj.ID, 1)),
		f.at("/api/2/files/%d/%s", pad(fj.ID, 19-len(fmt.Sprint(fj.ID)))),
		f.at("/api/2/files/%d/%s/download", pad(fj.ID, 2)),
		f.at("/api/2/files/%d/folder/%s", pad(d.ID, 1)),
		f.at("/api/2/files/%d/folder/00"),
	} {
		st, body := f.get(p)
		wantError(t, st, body, http.StatusNotFound, "not_found")
	}
	for _, v := range []url.Values{
		{"folder_id": {pad(d.ID, 1)}},
		{"folder_id": {"00"}},
		{"folder_id": {"0"}, "root_id": {pad(f.root.ID, 1)}},
	} {
		st, body := f.postForm(f.at("/api/2/files/%d/%d/move", fj.ID), v)
		wantError(t, st, body, http.StatusBadRequest, "invalid_request")
	}
	// The canonical spellings work.
	if st, body := f.get(f.at("/api/2/files/%d/%d", fj.ID)); st != http.StatusOK {
		t.Fatalf("%d %s", st, body)
	}
	if st, body := f.postForm(f.at("/api/2/files/%d/%d/move", fj.ID), url.Values{"folder_id": {fmt.Sprint(d.ID)}}); st != http.StatusOK {
		t.Fatalf("move: %d %s", st, body)
	}
}
