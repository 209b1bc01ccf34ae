package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// fsErrorCodes are the error codes the file-system routes may answer with
// for a bad request; anything else (500 unknown above all) is a bug.
var fsErrorCodes = map[string]bool{
	"invalid_request": true, "invalid_name": true, "name_too_long": true, "invalid_extension": true,
	"no_file_received": true, "forbidden": true, "not_found": true, "name_conflict": true,
	"resource_locked": true, "policy_error": true,
}

// checkFuzzAnswer fails unless w is a success or a spec error body.
func checkFuzzAnswer(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code == http.StatusOK {
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("200 with a body that is not JSON: %q", w.Body.Bytes())
		}
		return
	}
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("%d with a body that is not JSON: %q", w.Code, w.Body.Bytes())
	}
	if w.Code >= 500 || !fsErrorCodes[e.Error] {
		t.Fatalf("%d %q (%s)", w.Code, e.Error, e.Description)
	}
}

// FuzzUpload sends arbitrary bodies and content types to the upload
// route of a real server (real stores; the handler is called without the
// TLS listener so that executions are cheap).
func FuzzUpload(f *testing.F) {
	fx := newFixture(f)
	h := fx.srv.Config.Handler
	path := fx.at("/api/2/files/%d/upload")
	const ct = "multipart/form-data; boundary=XX"
	part := func(headers, body string) string {
		return "--XX\r\n" + headers + "\r\n\r\n" + body + "\r\n"
	}
	file := `Content-Disposition: form-data; name="file"; filename="a.txt"`
	for _, s := range []struct{ body, ct string }{
		{part(file, "hello") + "--XX--\r\n", ct},
		{part(`Content-Disposition: form-data; name="name"`, "b.txt") + part(file, "x") + "--XX--\r\n", ct},
		{part(`Content-Disposition: form-data; name="file"; filename*=UTF-8''%C3%BC.txt`, "x") + "--XX--\r\n", ct},
		{part(file, "cut off"), ct},
		{"--XX--\r\n", ct},
		{"", ct},
		{"garbage", ct},
		{part(file, "x"), "multipart/form-data"},
		{part(file, "x"), "multipart/mixed; boundary=XX"},
		{"a=b", "application/x-www-form-urlencoded"},
		{part(`Content-Disposition: form-data; name="file"; filename=".."`, "x") + "--XX--\r\n", ct},
		{part(`Content-Disposition: form-data; name="file"; filename="../../x"`, "x") + "--XX--\r\n", ct},
		{part(file+"\r\nContent-Transfer-Encoding: quoted-printable", "=41=42") + "--XX--\r\n", ct},
	} {
		f.Add([]byte(s.body), s.ct)
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+fx.token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		checkFuzzAnswer(t, w)
	})
}

// FuzzForm sends arbitrary form bodies to the routes that parse forms:
// create_folder, rename and move of files and folders, lock.
func FuzzForm(f *testing.F) {
	fx := newFixture(f)
	h := fx.srv.Config.Handler
	dir := fx.mustMkdir(fx.at("/api/2/files/%d/create_folder"), "dir")
	file := fx.mustUpload(fx.at("/api/2/files/%d/upload"), "file.txt", []byte("x"))
	routes := []string{
		fx.at("/api/2/files/%d/create_folder"),
		fx.at("/api/2/files/%d/folder/%d/create_folder", dir.ID),
		fx.at("/api/2/files/%d/%d/rename", file.ID),
		fx.at("/api/2/files/%d/%d/move", file.ID),
		fx.at("/api/2/files/%d/folder/%d/rename", dir.ID),
		fx.at("/api/2/files/%d/folder/%d/move", dir.ID),
		fx.at("/api/2/files/%d/%d/lock", file.ID),
	}
	const urlenc = "application/x-www-form-urlencoded"
	for i, s := range []struct{ body, ct string }{
		{"name=new", urlenc},
		{"name=..", urlenc},
		{"name=a%2Fb", urlenc},
		{"name=%zz", urlenc},
		{fmt.Sprintf("folder_id=%d&name=x", dir.ID), urlenc},
		{"folder_id=0&root_id=99", urlenc},
		{"duration=60", urlenc},
		{"--XX\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nm\r\n--XX--\r\n", "multipart/form-data; boundary=XX"},
		{"--XX\r\n", "multipart/form-data"},
		{"", ""},
	} {
		f.Add(uint8(i), []byte(s.body), s.ct)
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte, contentType string) {
		req := httptest.NewRequest(http.MethodPost, routes[int(route)%len(routes)], bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+fx.token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		checkFuzzAnswer(t, w)
	})
}
