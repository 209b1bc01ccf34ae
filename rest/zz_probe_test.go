package rest

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestZZProbe(t *testing.T) {
	f := newFixture(t)
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	fj := f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "f.txt", []byte("1"))
	show := func(what, p string) {
		st, b := f.get(p)
		fmt.Printf("%s: %d %s\n", what, st, b)
	}
	post := func(what, p string, v url.Values) {
		st, b := f.postForm(p, v)
		fmt.Printf("%s: %d %s\n", what, st, b)
	}
	post("lock D", f.at("/api/2/files/%d/folder/%d/lock", d.ID), nil)
	post("lock f in own locked D", f.at("/api/2/files/%d/%d/lock", fj.ID), nil)
	post("unlock D", f.at("/api/2/files/%d/folder/%d/unlock", d.ID), nil)
	post("lock f", f.at("/api/2/files/%d/%d/lock", fj.ID), nil)
	post("lock D over own f lock", f.at("/api/2/files/%d/folder/%d/lock", d.ID), nil)
	post("delete locked f", f.at("/api/2/files/%d/%d/delete", fj.ID), nil)
	show("deleted locked f", f.at("/api/2/files/%d/%d", fj.ID))
	post("unlock deleted f", f.at("/api/2/files/%d/%d/unlock", fj.ID), nil)
	post("delete D", f.at("/api/2/files/%d/folder/%d/delete", d.ID), nil)
	st, b := f.upload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "g.txt", strings.NewReader("x"))
	fmt.Println("upload into deleted", st, string(b))
	post("mkdir in deleted", f.at("/api/2/files/%d/folder/%d/create_folder", d.ID), url.Values{"name": {"x"}})
	post("lock deleted folder", f.at("/api/2/files/%d/folder/%d/lock", d.ID), nil)
	g := f.mustUpload(f.at("/api/2/files/%d/upload"), "g.txt", []byte("0123456789"))
	resp := f.request(http.MethodHead, f.at("/api/2/files/%d/%d/download", g.ID), f.token, nil, http.Header{"Range": {"bytes=2-4"}})
	fmt.Println("HEAD range", resp.StatusCode, resp.Header)
	resp.Body.Close()
	resp = f.request(http.MethodGet, f.at("/api/2/files/%d/%d/download", g.ID), f.token, nil, http.Header{"If-Modified-Since": {"garbage"}})
	fmt.Println("IMS garbage", resp.StatusCode)
	resp.Body.Close()
	resp = f.request(http.MethodGet, f.at("/api/2/files/%d/%d/download", g.ID), f.token, nil, http.Header{"If-None-Match": {`"x", W/"r` + fmt.Sprint(g.RevisionID) + `"`}})
	fmt.Println("INM list", resp.StatusCode, resp.Header.Get("Etag"))
	resp.Body.Close()
	resp = f.request(http.MethodGet, f.at("/api/2/files/%d/%d/download", g.ID), f.token, nil, http.Header{"Range": {"bytes=5-2"}})
	b2 := make([]byte, 200); n, _ := resp.Body.Read(b2)
	fmt.Println("range 5-2", resp.StatusCode, string(b2[:n]))
	resp.Body.Close()
	resp = f.request(http.MethodGet, f.at("/api/2/files/%d/%d/download", g.ID), f.token, nil, http.Header{"Range": {"items=0-1"}})
	fmt.Println("range items", resp.StatusCode)
	resp.Body.Close()
	show("search", f.at("/api/2/files/%d/search?query=f.txt"))
}
