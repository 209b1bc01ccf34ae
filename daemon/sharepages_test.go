package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestSharePages creates a share link over the API of a running daemon
// and opens its url: the page is served on the same HTTPS listener, with
// its security headers, and its download gives the file.
func TestSharePages(t *testing.T) {
	_, _, _, lc := runningDaemon(t)
	data := []byte("shared through a page\n")
	if status, err := lc.upload("page.txt", data, false); err != nil || status >= 300 {
		t.Fatalf("upload: %d %v", status, err)
	}
	status, body := lc.do(http.MethodPost, fmt.Sprintf("/api/2/files/%d/%d/share", lc.root, lc.fileID("page.txt")), strings.NewReader(""), "application/x-www-form-urlencoded")
	var link struct {
		URL string `json:"url"`
	}
	if status != 200 && status != 201 || json.Unmarshal(body, &link) != nil || !strings.Contains(link.URL, "/s/") {
		t.Fatalf("create link: %d %s", status, body)
	}
	// The url names the listener's host:port as the request did.
	for _, tt := range []struct {
		path, want, ctype string
	}{
		{"", "page.txt", "text/html; charset=utf-8"},
		{"/download", string(data), "text/plain; charset=utf-8"},
	} {
		resp, err := lc.c.Get(link.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), tt.want) || resp.Header.Get("Content-Type") != tt.ctype {
			t.Errorf("GET %s%s: %d %s %q", link.URL, tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s%s: headers %v", link.URL, tt.path, resp.Header)
		}
	}
	if code, _ := get(t, lc.c, lc.base+"/s/AAAAAAAAAAAAAAAAAAAAAAAA"); code != http.StatusNotFound {
		t.Errorf("wrong hash: %d", code)
	}
}
