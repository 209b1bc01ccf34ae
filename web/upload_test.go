package web_test

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth/share"
)

// TestUpload uploads through a folder link's page: the form's CSRF token
// must come back first, a taken name is 409, and a link without write
// access (or without anon_edit, for someone not signed in) offers no
// form and refuses the POST. A refusal of a large file reaches the
// browser: before, net/http answered with megabytes of the body unread
// and closed the connection, and the client, still sending, got a reset
// in place of the page (a full disk's "No space" included).
func TestUpload(t *testing.T) {
	s := newSite(t)
	_, u := s.link(t, s.docs, share.LinkSettings{WriteAccess: ptr(true), AnonEdit: ptr(true)})
	_, readOnly := s.link(t, s.docs, share.LinkSettings{})
	_, noAnon := s.link(t, s.docs, share.LinkSettings{WriteAccess: ptr(true)})
	jar, _ := cookiejar.New(nil)
	// Expect: 100-continue, as curl sends it for large bodies; browsers
	// send the body at once, which loses the answer the same way.
	c := &http.Client{Jar: jar, Transport: &http.Transport{ExpectContinueTimeout: 10 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	page := u + "?folder=" + strconv.FormatUint(s.sub.ID, 10)
	resp, err := c.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil || !strings.Contains(body, `enctype="multipart/form-data"`) {
		t.Fatalf("no upload form: %s", body)
	}
	send := func(url, csrf, name, content string) (int, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		if csrf != "" {
			mw.WriteField("csrf", csrf)
		}
		for n := range strings.SplitSeq(name, ",") { // several files, as a drop sends them
			fw, _ := mw.CreateFormFile("file", n)
			fw.Write([]byte(content))
		}
		mw.Close()
		req, _ := http.NewRequest(http.MethodPost, url, &b)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Expect", "100-continue")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		return resp.StatusCode, resp.Header.Get("Location") + readAll(t, resp)
	}
	up := u + "/upload?folder=" + strconv.FormatUint(s.sub.ID, 10)
	tests := []struct {
		name, url, csrf, file string
		status                int
		want                  string
		size                  int // of each file; 0 for a short text
	}{
		{"upload", up, m[1], "new.txt", 303, "?folder=" + strconv.FormatUint(s.sub.ID, 10), 0},
		{"name taken", up, m[1], "new.txt", 409, "Name taken", 0},
		{"several files", up, m[1], "one.txt,two.txt", 303, "?folder=", 0},
		{"a later name taken", up, m[1], "three.txt,new.txt,four.txt", 409, "The file before it was uploaded.", 0},
		{"no csrf", up, "", "other.txt", 403, "Form expired", 0},
		{"wrong csrf", up, strings.Repeat("B", 24), "other.txt", 403, "Form expired", 0},
		{"read-only link", readOnly + "/upload", m[1], "other.txt", 403, "Not allowed", 0},
		{"no anon_edit", noAnon + "/upload", m[1], "other.txt", 403, "Not allowed", 0},
		{"folder outside", u + "/upload?folder=" + strconv.FormatUint(s.root.FolderID, 10), m[1], "other.txt", 404, "Link not found", 0},
		{"name taken, 8 MiB", up, m[1], "new.txt", 409, "Name taken", 8 << 20},
		{"no csrf, 8 MiB", up, "", "other.txt", 403, "Form expired", 8 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, tries := "uploaded", 1
			if tt.size > 0 {
				content, tries = strings.Repeat("x", tt.size), 10
			}
			for range tries {
				if status, body := send(tt.url, tt.csrf, tt.file, content); status != tt.status || !strings.Contains(body, tt.want) {
					t.Fatalf("%d, want %d: %s", status, tt.status, body)
				}
			}
		})
	}
	kids, _, err := s.st.FS.List(context.Background(), s.root.ID, s.sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range kids {
		names = append(names, k.Name)
	}
	// three.txt went in before the taken name stopped the form; four.txt,
	// after it, did not.
	slices.Sort(names)
	if got := strings.Join(names, ","); got != "deep.txt,new.txt,one.txt,three.txt,two.txt" {
		t.Errorf("subfolder holds %v", names)
	}
	for _, l := range []string{readOnly, noAnon} {
		if _, body := get(t, l); strings.Contains(body, "multipart/form-data") {
			t.Errorf("%s offers an upload form", l)
		}
	}
}
