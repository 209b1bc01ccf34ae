package rest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// TestPersonRootsListSubscribedShares: a person object's roots are the
// person's sync root and then the organization shares they subscribe to
// (directly or through a group), each with the person's own permissions,
// whoever asks; a share the person does not subscribe to is not listed,
// and one they are removed from goes.
func TestPersonRootsListSubscribedShares(t *testing.T) {
	w := newOrgWorld(t)
	create := func(name string) uint64 {
		t.Helper()
		st, body := w.postAs(w.childAdmin, orgPath(w.child.ID, "/shares/create"), url.Values{"name": {name}})
		if st != http.StatusOK {
			t.Fatalf("create: %d %s", st, body)
		}
		var root rootJSON
		json.Unmarshal(body, &root)
		return root.ID
	}
	subscribe := func(id uint64, subs string) {
		t.Helper()
		st, body := w.postAs(w.childAdmin, orgPath(w.child.ID, fmt.Sprintf("/share/%d/subscribers/update", id)), url.Values{"subscribers": {subs}})
		if st != http.StatusOK {
			t.Fatalf("subscribers/update: %d %s", st, body)
		}
	}
	team, board, other := create("Team"), create("Board"), create("Other")
	subscribe(team, fmt.Sprintf(`[[%d, "web", "VIEWER"]]`, w.carol.ID))
	subscribe(board, fmt.Sprintf(`[[%d, "web", "COLLABORATOR"]]`, w.carol.ID))
	_ = other

	type entry struct {
		ID    uint64
		Perms []string
	}
	roots := func(token string, path string) []entry {
		t.Helper()
		st, body := w.getAs(token, path)
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
		var p struct {
			Roots []rootJSON `json:"roots"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		var out []entry
		for _, r := range p.Roots {
			out = append(out, entry{r.ID, r.Permissions})
		}
		slices.SortFunc(out[min(1, len(out)):], func(a, b entry) int { return int(a.ID) - int(b.ID) })
		return out
	}
	carolPath := fmt.Sprintf("/api/2/person/%d", w.carol.ID)
	shared := []entry{{team, []string{permView, permRead}}, {board, []string{permView, permRead, permWrite}}}
	slices.SortFunc(shared, func(a, b entry) int { return int(a.ID) - int(b.ID) })
	for _, tc := range []struct {
		name, token, path string
	}{
		{"the person", w.carolToken, "/api/2/person"},
		{"the person by id", w.carolToken, carolPath},
		{"administrator of the organization", w.childAdmin, carolPath},
		{"administrator of the parent", w.parentAdmin, carolPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := roots(tc.token, tc.path)
			if len(got) != 3 || got[0].ID != w.carolRoot.ID {
				t.Fatalf("roots %+v, want the sync root %d then %+v", got, w.carolRoot.ID, shared)
			}
			for i, want := range shared {
				if got[i+1].ID != want.ID || !slices.Equal(got[i+1].Perms, want.Perms) {
					t.Fatalf("roots %+v, want the sync root then %+v", got, shared)
				}
			}
		})
	}
	t.Run("not subscribed", func(t *testing.T) {
		for _, r := range roots(w.childAdmin, fmt.Sprintf("/api/2/person/%d", w.childAdminUser.ID)) {
			if r.ID == team || r.ID == board || r.ID == other {
				t.Fatalf("the administrator's own object lists share %d they only manage", r.ID)
			}
		}
	})
	t.Run("unsubscribed", func(t *testing.T) {
		subscribe(board, `[]`)
		got := roots(w.childAdmin, carolPath)
		if len(got) != 2 || got[1].ID != team {
			t.Fatalf("after removal: %+v", got)
		}
	})
	t.Run("another tenant", func(t *testing.T) {
		st, body := w.getAs(w.otherAdmin, carolPath)
		if st == http.StatusOK {
			t.Fatalf("another tenant read the person: %s", body)
		}
	})
}
