package rest

import (
	"net/http"
	"strings"
	"testing"
)

// Part headers before the file count toward the same bound as the
// fields: mime/multipart alone holds up to 10 MiB of one part's headers.
func TestUploadPartHeadersBounded(t *testing.T) {
	f := newFixture(t)
	up := f.at("/api/2/files/%d/upload")
	send := func(body string) (int, []byte) {
		h := http.Header{}
		h.Set("Content-Type", "multipart/form-data; boundary=XX")
		return f.readAll(f.request(http.MethodPost, up, f.token, strings.NewReader(body), h))
	}
	pad := strings.Repeat("p", 2<<20)
	for name, body := range map[string]string{
		"a field's header": multipartRaw("XX",
			"Content-Disposition: form-data; name=\"other\"\r\nX-Pad: "+pad+"\r\n\r\nv",
			"Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nx") + "--XX--\r\n",
		"many fields' headers": multipartRaw("XX",
			"Content-Disposition: form-data; name=\"f1\"\r\nX-Pad: "+pad[:50000]+"\r\n\r\nv",
			"Content-Disposition: form-data; name=\"f2\"\r\nX-Pad: "+pad[:50000]+"\r\n\r\nv",
			"Content-Disposition: form-data; name=\"f3\"\r\nX-Pad: "+pad[:50000]+"\r\n\r\nv",
			"Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nx") + "--XX--\r\n",
		"the file's header": multipartRaw("XX",
			"Content-Disposition: form-data; name=\"file\"; filename=\"b.txt\"\r\nX-Pad: "+pad+"\r\n\r\nx") + "--XX--\r\n",
	} {
		st, b := send(body)
		wantError(t, st, b, http.StatusBadRequest, "invalid_request")
		if !strings.Contains(string(b), "131072") {
			t.Fatalf("%s: the description does not name the limit: %s", name, b)
		}
	}
	if _, err := f.fs.Lookup(t.Context(), f.root.ID, "/a.txt"); err == nil {
		t.Fatal("a.txt was stored")
	}
	// Within the bound, the upload goes through.
	st, b := send(multipartRaw("XX",
		"Content-Disposition: form-data; name=\"file\"; filename=\"c.txt\"\r\nX-Pad: "+strings.Repeat("p", 1000)+"\r\n\r\nx") + "--XX--\r\n")
	if st != http.StatusOK {
		t.Fatalf("upload with a small extra header: %d %s", st, b)
	}
}
