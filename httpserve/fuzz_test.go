package httpserve_test

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth/httpserve"
)

// FuzzRange sends arbitrary Range and If-Range headers through berth's
// reading of them (ServableRange, Sends, RangeBytes) and then to
// ServeContent, as every front end answers a download, over contents of a fuzzed size, and checks what the
// answer holds: a status ServeContent may give for a Range; every byte
// sent is the contents' byte at that offset, and no part exceeds the
// contents; what a share link charges (RangeBytes) is never less than
// what was sent; a 416 is charged nothing; and ServableRange written once
// reads back the same (its header is a fixed point).
func FuzzRange(f *testing.F) {
	for _, s := range []struct {
		rng, ifRange string
		size         uint16
	}{
		{"bytes=0-0", "", 10},
		{"bytes=0-", "", 0},
		{"bytes=-5", "", 3},
		{"bytes=-0", "", 10},
		{"bytes=5-2", "", 10},
		{"bytes=0-1,3-4,-2", "", 10},
		{"bytes=0-1,0-1,0-1,0-1,0-1,0-1", "", 4},
		{"BYTES = 1-2", "", 10},
		{"bytes=+1-+2", "", 10},
		{"bytes=99999999999999999999-", "", 10},
		{"bytes=-99999999999999999999", "", 10},
		{"bytes=9-", "", 10},
		{"bytes=10-", "", 10},
		{"bytes=,,,", "", 10},
		{"items=0-1", "", 10},
		{"bytes=0-1", `"tag"`, 10},
		{"bytes=0-1", `W/"tag"`, 10},
		{"bytes=0-1", "Sat, 01 Jan 2000 00:00:00 GMT", 10},
		{"bytes=0-1", "garbage", 10},
		{"bytes=1-\t2 , 4 -5", "", 10},
		{"bytes=0-" + strings.Repeat("0,0-", 120), "", 10},
	} {
		f.Add(s.rng, s.ifRange, s.size)
	}
	const etag = `"tag"`
	modified := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, rng, ifRange string, size uint16) {
		n := int64(size % 4096)
		content := make([]byte, n)
		for i := range content {
			content[i] = byte(i*7 + i>>8)
		}
		req := httptest.NewRequest(http.MethodGet, "/f", nil)
		req.Header["Range"] = []string{rng}
		if ifRange != "" {
			req.Header["If-Range"] = []string{ifRange}
		}
		sends, fromStart := httpserve.Sends(req, etag, modified)
		charged := httpserve.RangeBytes(req, n)
		if charged < 0 || charged > n {
			t.Fatalf("RangeBytes %d of %d", charged, n)
		}

		probe := req.Clone(req.Context())
		httpserve.ServableRange(probe)
		once := probe.Header.Get("Range")
		httpserve.ServableRange(probe)
		if got := probe.Header.Get("Range"); got != once {
			t.Fatalf("ServableRange is no fixed point: %q then %q", once, got)
		}

		w := httptest.NewRecorder()
		err := httpserve.ServeContent(w, req, httpserve.Content{Name: "f.bin", ETag: etag, Modified: modified, Body: bytes.NewReader(content)})
		if err != nil {
			t.Fatal(err)
		}
		body := w.Body.Bytes()
		sent := int64(0)
		switch w.Code {
		case http.StatusOK:
			if !bytes.Equal(body, content) {
				t.Fatalf("200 with %d bytes of %d", len(body), n)
			}
			sent = n
		case http.StatusRequestedRangeNotSatisfiable:
			// Sends knows no size: a Range that starts past the end
			// sends, it says, but not from the start, and is charged
			// nothing.
			if sends && (fromStart || charged != 0) {
				t.Fatalf("416 where Sends said it sends (from the start %v) and RangeBytes charged %d", fromStart, charged)
			}
			if cr := w.Header().Get("Content-Range"); cr != "bytes */"+strconv.FormatInt(n, 10) {
				t.Fatalf("416 with Content-Range %q", cr)
			}
			return
		case http.StatusPartialContent:
			sent = checkParts(t, w, content)
		default:
			t.Fatalf("status %d", w.Code)
		}
		// Empty contents are sent whole (200, no byte) for any Range:
		// ServeContent ignores one no byte satisfies there.
		if !sends && n > 0 {
			t.Fatalf("%d where Sends said it sends nothing", w.Code)
		}
		// RangeBytes may err high, never low, and speaks for a Range that
		// stands (an If-Range that does not match sends everything).
		if req.Header.Get("Range") != "" && w.Code == http.StatusPartialContent && sent > charged {
			t.Fatalf("sent %d bytes, RangeBytes charged %d", sent, charged)
		}
	})
}

// checkParts checks a 206 answer's parts against content and returns the
// content bytes sent.
func checkParts(t *testing.T, w *httptest.ResponseRecorder, content []byte) int64 {
	t.Helper()
	check := func(cr string, b []byte) int64 {
		var first, last, total int64
		spec, ok := strings.CutPrefix(cr, "bytes ")
		if !ok {
			t.Fatalf("Content-Range %q", cr)
		}
		r, tot, _ := strings.Cut(spec, "/")
		a, z, _ := strings.Cut(r, "-")
		var err1, err2, err3 error
		first, err1 = strconv.ParseInt(a, 10, 64)
		last, err2 = strconv.ParseInt(z, 10, 64)
		total, err3 = strconv.ParseInt(tot, 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || total != int64(len(content)) ||
			first < 0 || last < first || last >= total {
			t.Fatalf("Content-Range %q of %d bytes", cr, len(content))
		}
		if !bytes.Equal(b, content[first:last+1]) {
			t.Fatalf("part %q holds other bytes", cr)
		}
		return last - first + 1
	}
	mt, params, err := mime.ParseMediaType(w.Header().Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" {
		return check(w.Header().Get("Content-Range"), w.Body.Bytes())
	}
	var sent int64
	mr := multipart.NewReader(bytes.NewReader(w.Body.Bytes()), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return sent
		}
		if err != nil {
			t.Fatalf("multipart: %v", err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatalf("multipart part: %v", err)
		}
		sent += check(p.Header.Get("Content-Range"), b)
	}
}
