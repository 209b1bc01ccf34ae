package rest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestPagingExtremes: every paged list takes offsets up to the largest
// int, where offset+limit overflows, and answers an empty page with the
// list's true total; offsets and limits out of range, or not decimal,
// are 400 invalid_request naming the parameter.
func TestPagingExtremes(t *testing.T) {
	k := newIsoCast(t)
	k.tenant("c1", k.p.org.ID, nil)
	org := fmt.Sprintf("/api/2/organization/%d/", k.p.org.ID)
	lists := []string{org + "persons", org + "guests", org + "groups", org + "roots", org + "organizations",
		org + "machines", org + "auth_sources", org + "activity", fmt.Sprintf("/api/2/person/%d/activity", k.p.plain.ID)}
	type pageOut struct {
		Offset  int               `json:"offset"`
		Results []json.RawMessage `json:"results"`
		Total   int               `json:"total"`
	}
	for _, list := range lists {
		st, b := k.f.send(http.MethodGet, list, k.p.adminTok, nil)
		if st != http.StatusOK {
			t.Fatalf("%s: %d %s", list, st, b)
		}
		var first pageOut
		decode(t, b, &first)
		for _, off := range []string{"9223372036854775807", "9223372036854775757", fmt.Sprint(first.Total)} {
			q := url.Values{"offset": {off}, "limit": {"100"}}
			st, b := k.f.send(http.MethodGet, list+"?"+q.Encode(), k.p.adminTok, nil)
			if st != http.StatusOK {
				t.Errorf("%s offset %s: %d %s", list, off, st, b)
				continue
			}
			var p pageOut
			decode(t, b, &p)
			if len(p.Results) != 0 || p.Total != first.Total || fmt.Sprint(p.Offset) != off {
				t.Errorf("%s offset %s: %s; want no results, total %d", list, off, b, first.Total)
			}
		}
		for _, bad := range []url.Values{
			{"offset": {"9223372036854775808"}}, {"offset": {"-1"}}, {"offset": {"0x10"}}, {"offset": {"1e3"}},
			{"offset": {" 1"}}, {"offset": {""}}, {"limit": {"0"}}, {"limit": {"101"}}, {"limit": {"-9223372036854775808"}},
		} {
			st, b := k.f.send(http.MethodGet, list+"?"+bad.Encode(), k.p.adminTok, nil)
			if st != http.StatusBadRequest || !json.Valid(b) || !strings.Contains(string(b), `"error":"invalid_request"`) {
				t.Errorf("%s ?%s: %d %s, want 400 invalid_request", list, bad.Encode(), st, b)
			}
		}
	}
}
