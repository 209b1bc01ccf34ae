package bench

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// tusSize is the size of each upload of BenchmarkTus.
const tusSize = 256 << 20

// BenchmarkTus uploads 256 MiB of random data through the REST upload
// and through tus (issue 15, item 5) on the same server in the same run:
// in one PATCH, and in four pieces (each piece's last chunk is read back
// and cut again with the next). Run it with -benchtime=1x.
func BenchmarkTus(b *testing.B) {
	s := newBerth(b, false)
	seed := uint64(100)
	next := func() uint64 { seed++; return seed }
	b.Run("rest-upload", func(b *testing.B) {
		b.SetBytes(tusSize)
		for b.Loop() {
			s.upload(b, s.root.FolderID, fmt.Sprintf("rest%d.bin", seed), newGen(next(), tusSize), tusSize)
		}
	})
	for _, pieces := range []int{1, 4} {
		b.Run(fmt.Sprintf("tus-%d-patches", pieces), func(b *testing.B) {
			b.SetBytes(tusSize)
			for b.Loop() {
				src := newGen(next(), tusSize)
				loc := s.tusCreate(b, fmt.Sprintf("tus%d.bin", seed), tusSize)
				piece := int64(tusSize / pieces)
				for off := int64(0); off < tusSize; off += piece {
					s.tusPatch(b, loc, off, io.LimitReader(src, piece), piece)
				}
			}
		})
	}
}

// tusRequest sends one tus request and fails unless it is answered want.
func (s *berth) tusRequest(b *testing.B, method, url string, h http.Header, body io.Reader, n int64, want int) *http.Response {
	b.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		b.Fatal(err)
	}
	req.ContentLength = n
	req.Header = h
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, msg)
	}
	return resp
}

// tusCreate creates an upload of size bytes named name in the top folder
// and returns its URL.
func (s *berth) tusCreate(b *testing.B, name string, size int64) string {
	b.Helper()
	enc := base64.StdEncoding.EncodeToString
	meta := strings.Join([]string{"root_id " + enc([]byte(fmt.Sprint(s.root.ID))), "filename " + enc([]byte(name))}, ",")
	h := http.Header{"Upload-Length": {strconv.FormatInt(size, 10)}, "Upload-Metadata": {meta}}
	resp := s.tusRequest(b, http.MethodPost, s.srv.URL+"/api/2/tus/", h, nil, 0, http.StatusCreated)
	return resp.Header.Get("Location")
}

// tusPatch sends the piece at off.
func (s *berth) tusPatch(b *testing.B, url string, off int64, body io.Reader, n int64) {
	b.Helper()
	h := http.Header{"Upload-Offset": {strconv.FormatInt(off, 10)}, "Content-Type": {"application/offset+octet-stream"}}
	s.tusRequest(b, http.MethodPatch, url, h, body, n, http.StatusNoContent)
}
