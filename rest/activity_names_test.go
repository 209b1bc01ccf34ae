package rest

import (
	"fmt"
	"net/http"
	"testing"

	"berth/account"
)

// TestActivityFileNames: the names of files and folders in activity
// records are shown to the root's owner and to administrators who may
// browse it (admin_browse_files), and hidden from the other
// administrators, who read "a file" or "a folder" and no name in
// data_text (docs/api.md "File names in the activity log").
func TestActivityFileNames(t *testing.T) {
	k := newIsoCast(t)
	child := k.tenant("c1", k.p.org.ID, nil)
	browse := k.tenant("b", k.p.org.ID, func(p *account.Policy) { p.AdminBrowseFiles = true })
	type want struct{ file, fileData, dir, dirData string }
	shown := func(n *isoTenant) want {
		return want{"zq" + n.tag + "-file.txt", "12 bytes", "zq" + n.tag + "-folder", "zq" + n.tag + "-folder"}
	}
	hidden := want{"a file", "12 bytes", "a folder", ""}
	for _, tc := range []struct {
		name   string
		n      *isoTenant
		token  string
		expect want
	}{
		{"the owner", child, child.plnTok, shown(child)},
		{"the organization's administrator", child, child.adminTok, hidden},
		{"the parent's administrator", child, k.p.adminTok, hidden},
		{"the owner, admin_browse_files", browse, browse.plnTok, shown(browse)},
		{"the organization's administrator, admin_browse_files", browse, browse.adminTok, shown(browse)},
		{"the parent's administrator, admin_browse_files", browse, k.p.adminTok, shown(browse)},
		{"the parent's administrator, its own plain person", k.p, k.p.adminTok, hidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(path string) activityBody {
				t.Helper()
				st, b := k.f.send(http.MethodGet, path, tc.token, nil)
				if st != http.StatusOK {
					t.Fatalf("GET %s: %d %s", path, st, b)
				}
				var a activityBody
				decode(t, b, &a)
				return a
			}
			text := func(s *string) string {
				if s == nil {
					return ""
				}
				return *s
			}
			check := func(what string, a activityBody, name, data string) {
				t.Helper()
				if a.ActedOnText != name || text(a.DataText) != data {
					t.Errorf("%s: acted_on_text %q, data_text %q; want %q, %q", what, a.ActedOnText, text(a.DataText), name, data)
				}
				if a.ActedOnRootID == nil || a.ActedOnPersonID == nil {
					t.Errorf("%s: the root and owner ids are shown to whoever reads the record: %+v", what, a)
				}
			}
			check("upload", read(fmt.Sprintf("/api/2/activity/%d", tc.n.fileRec)), tc.expect.file, tc.expect.fileData)
			check("rename", read(fmt.Sprintf("/api/2/activity/%d", tc.n.dirRec)), tc.expect.dir, tc.expect.dirData)

			// The same in the person's list.
			st, b := k.f.send(http.MethodGet, fmt.Sprintf("/api/2/person/%d/activity", tc.n.plain.ID), tc.token, nil)
			if st != http.StatusOK {
				t.Fatalf("person activity: %d %s", st, b)
			}
			var page pagedBody[activityBody]
			decode(t, b, &page)
			found := 0
			for _, a := range page.Results {
				switch a.ID {
				case tc.n.fileRec:
					check("upload in the list", a, tc.expect.file, tc.expect.fileData)
					found++
				case tc.n.dirRec:
					check("rename in the list", a, tc.expect.dir, tc.expect.dirData)
					found++
				}
			}
			if found != 2 {
				t.Errorf("the person's list holds %d of the two records", found)
			}
		})
	}
}
