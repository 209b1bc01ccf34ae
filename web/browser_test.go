package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"berth/share"
)

// chrome starts a headless Chromium for t, at a phone's width, or skips
// t when none is installed (fails instead under BERTH_INTEROP=required,
// as the other interoperability tests do).
func chrome(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("BERTH_INTEROP") == "required" {
			t.Fatal("BERTH_INTEROP=required but no chromium is installed (apt-get install chromium)")
		}
		t.Skip("no chromium installed (apt-get install chromium); skipping the browser test")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// step bounds one browser step, so a hang fails the test rather than
// the package's timeout.
func step(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// waitListed waits until the page after a form's redirect lists every
// name. The old page's listing can vanish between a query and a read
// while the browser navigates, so the poll reads through one script that
// tolerates it.
func waitListed(t *testing.T, ctx context.Context, names ...string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		got, _ := chromedp.Run(sctx, chromedp.Evaluate[string](
			`(document.querySelector("#listing") || {}).innerText || ""`))
		if !slices.ContainsFunc(names, func(n string) bool { return !strings.Contains(got, n) }) {
			return
		}
		if sctx.Err() != nil {
			t.Fatalf("%v not listed: %q", names, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// screenshot takes a PNG of the page, checks it, and keeps it in a
// temporary directory (the path is logged).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 100 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
	}
	p := filepath.Join(t.TempDir(), name+".png")
	if err := os.WriteFile(p, png, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", p, len(png))
}

// download clicks sel in the browser and returns the bytes it saved.
func download(t *testing.T, ctx context.Context, sel string) []byte {
	t.Helper()
	dir := t.TempDir()
	// The events end with dctx, so a download that never completes fails
	// the test instead of hanging it.
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	progress := chromedp.Events(dctx, browser.DownloadProgress)
	step(t, ctx,
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
				Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: ptr(true),
			})
			return err
		}),
		chromedp.Click(chromedp.CSS(sel)),
	)
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download of %s: %v", sel, err)
		}
		switch ev.State {
		case browser.DownloadProgressStateCanceled:
			t.Fatalf("download of %s cancelled", sel)
		case browser.DownloadProgressStateCompleted:
			b, err := os.ReadFile(filepath.Join(dir, ev.GUID))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatal("no download")
	return nil
}

// TestBrowserFileLink opens a file link: the page shows the name and
// size, and its download button saves the file's bytes.
func TestBrowserFileLink(t *testing.T) {
	ctx := chrome(t)
	s := newSite(t)
	_, u := s.link(t, s.file, share.LinkSettings{})
	step(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#download")))
	if got := text(t, ctx, "#name"); got != "report.pdf" {
		t.Errorf("name %q", got)
	}
	if got := text(t, ctx, "#size"); got != "48 B" {
		t.Errorf("size %q", got)
	}
	// The page is styled from the sheet's versioned URL, as the page's
	// policy lets it load: the header's colour is the sheet's.
	styled, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`document.styleSheets[0].href + " " + getComputedStyle(document.querySelector("header")).backgroundColor`))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`/s/static/style\.[0-9a-f]{16}\.css rgb\(29, 53, 87\)$`).MatchString(styled) {
		t.Errorf("style sheet and header colour %q, want the versioned sheet's rgb(29, 53, 87)", styled)
	}
	screenshot(t, ctx, "file")
	if got := download(t, ctx, "#download"); string(got) != fileBody {
		t.Errorf("downloaded %q, want %q", got, fileBody)
	}
}

// TestBrowserFolderLink walks a folder link into its subfolder and
// downloads the subfolder's zip.
func TestBrowserFolderLink(t *testing.T) {
	ctx := chrome(t)
	s := newSite(t)
	_, u := s.link(t, s.docs, share.LinkSettings{})
	step(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#listing")))
	if got := text(t, ctx, "#listing"); !strings.Contains(got, "notes.txt") || !strings.Contains(got, "sub/") {
		t.Errorf("listing %q", got)
	}
	screenshot(t, ctx, "folder")
	step(t, ctx, chromedp.Click(chromedp.CSS("a.folder")), chromedp.WaitVisible(chromedp.CSS("#crumbs a")))
	if got := text(t, ctx, "#name"); got != "sub" {
		t.Errorf("subfolder page named %q", got)
	}
	if got := text(t, ctx, "#listing"); !strings.Contains(got, "deep.txt") || strings.Contains(got, "notes.txt") {
		t.Errorf("subfolder listing %q", got)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.Contains(loc, "folder="+strconv.FormatUint(s.sub.ID, 10)) {
		t.Errorf("location %q %v", loc, err)
	}
	screenshot(t, ctx, "subfolder")
	names := zipNames(t, download(t, ctx, "#zip"))
	if len(names) != 1 || names[0] != "deep.txt" {
		t.Errorf("zip holds %v, want [deep.txt]", names)
	}
}

// TestBrowserExpiredLink sees the expired page.
func TestBrowserExpiredLink(t *testing.T) {
	ctx := chrome(t)
	s := newSite(t)
	_, u := s.link(t, s.file, share.LinkSettings{Expires: ptr("2020-01-01")})
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(u))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 410 {
		t.Errorf("status %d, want 410", resp.Status)
	}
	if got := text(t, ctx, "#problem"); got != "Link expired" {
		t.Errorf("problem %q", got)
	}
	screenshot(t, ctx, "expired")
}

// TestBrowserSignInAndUpload signs in to a login_required folder link
// through its form, uploads a file through the page's upload form, then
// signs out through the page's sign-out form: each form posts with its
// CSRF token and no JavaScript.
func TestBrowserSignInAndUpload(t *testing.T) {
	ctx := chrome(t)
	s := newSite(t)
	_, u := s.link(t, s.docs, share.LinkSettings{LoginRequired: ptr(true), WriteAccess: ptr(true)})
	step(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#signin")))
	screenshot(t, ctx, "signin")
	step(t, ctx,
		chromedp.SendKeys(chromedp.CSS(`input[name="username"]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "correct horse battery"),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#listing")),
	)
	if got := text(t, ctx, "#listing"); !strings.Contains(got, "notes.txt") {
		t.Fatalf("listing after sign-in %q", got)
	}
	file := filepath.Join(t.TempDir(), "from-browser.txt")
	if err := os.WriteFile(file, []byte("sent by chromium"), 0o600); err != nil {
		t.Fatal(err)
	}
	step(t, ctx,
		chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{file}),
		chromedp.Click(chromedp.CSS("#upload")),
	)
	waitListed(t, ctx, "from-browser.txt")
	screenshot(t, ctx, "uploaded")
	step(t, ctx,
		chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#signin")),
	)
	screenshot(t, ctx, "signed-out")
}

// TestBrowserPreviews opens the pages of an image, a text and a PDF link:
// the image is drawn under the page's policy, the text shows escaped, and
// the PDF's frame is allowed to load on the page.
func TestBrowserPreviews(t *testing.T) {
	ctx := chrome(t)
	s := newSite(t)
	_, img := s.link(t, s.write(t, "photo.png", pngBytes(t)), share.LinkSettings{})
	step(t, ctx, chromedp.Navigate(img), chromedp.WaitVisible(chromedp.CSS("#preview")))
	w, err := chromedp.Run(ctx, chromedp.Evaluate[int](`new Promise(done => {
		const i = document.getElementById("preview");
		if (i.complete) { done(i.naturalWidth); } else { i.onload = () => done(i.naturalWidth); i.onerror = () => done(-1); }
	})`, chromedp.EvalAwaitPromise))
	if err != nil || w != 40 {
		t.Errorf("image preview drawn %d wide (%v), want 40", w, err)
	}
	screenshot(t, ctx, "image-preview")
	_, txt := s.link(t, s.notes, share.LinkSettings{})
	step(t, ctx, chromedp.Navigate(txt), chromedp.WaitVisible(chromedp.CSS("#preview")))
	if got := text(t, ctx, "#preview"); got != "<script>alert(1)</script>" {
		t.Errorf("text preview %q", got)
	}
	screenshot(t, ctx, "text-preview")
	_, pdf := s.link(t, s.file, share.LinkSettings{})
	step(t, ctx, chromedp.Navigate(pdf), chromedp.WaitVisible(chromedp.CSS("#preview")))
	typ, err := chromedp.Run(ctx, chromedp.Evaluate[string](`new Promise(done => {
		const f = document.getElementById("preview");
		const look = () => { try { const d = f.contentDocument; return d ? d.contentType : "blocked"; } catch (e) { return "error " + e; } };
		if (f.contentDocument && f.contentDocument.readyState === "complete" && look() !== "about:blank") { done(look()); } else { f.onload = () => done(look()); }
	})`, chromedp.EvalAwaitPromise))
	t.Logf("pdf frame: %q %v", typ, err)
	if err != nil || typ != "application/pdf" {
		t.Errorf("pdf frame holds %q (%v), want application/pdf", typ, err)
	}
	screenshot(t, ctx, "pdf-preview")
}

// TestBrowserDropUpload drops two files on an upload link's page, as a
// user dragging them from a file manager does: the page's script (allowed
// by its hash under the page's policy) sends them through the form, and
// the page after the redirect lists both.
func TestBrowserDropUpload(t *testing.T) {
	ctx := chrome(t)
	s := newSite(t)
	_, u := s.link(t, s.docs, share.LinkSettings{WriteAccess: ptr(true), AnonEdit: ptr(true)})
	step(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(".drop-hint")))
	screenshot(t, ctx, "drop-target")
	// A drop with files, as the browser builds one from a real drag.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const dt = new DataTransfer();
		dt.items.add(new File(["dropped one"], "dropped-1.txt", {type: "text/plain"}));
		dt.items.add(new File(["dropped two"], "dropped-2.txt", {type: "text/plain"}));
		document.body.dispatchEvent(new DragEvent("dragover", {dataTransfer: dt, bubbles: true, cancelable: true}));
		return document.body.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
	})()`)); err != nil {
		t.Fatal(err)
	}
	waitListed(t, ctx, "dropped-1.txt", "dropped-2.txt")
	screenshot(t, ctx, "dropped")
	_, f, err := s.st.FS.OpenPath(context.Background(), s.root.ID, "/docs/dropped-2.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, _ := io.ReadAll(f); string(b) != "dropped two" {
		t.Errorf("dropped-2.txt holds %q", b)
	}
}

// TestBrowserCrossSite: another site's page, in the browser of someone
// who opened an upload link (and so holds its CSRF cookie), posts to the
// link's upload, by a form the page submits and by fetch: even handed
// the right token (as if it had leaked), nothing is stored, because the
// browser neither sends the SameSite=Strict cookie on such a request nor
// calls it same-origin. Another site is another host for the browser
// (localhost for 127.0.0.1).
func TestBrowserCrossSite(t *testing.T) {
	ctx := chrome(t)
	s := newSite(t)
	l, u := s.link(t, s.docs, share.LinkSettings{WriteAccess: ptr(true), AnonEdit: ptr(true)})
	step(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#upload-form")))
	tok, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('input[name="csrf"]').value`))
	if err != nil || tok == "" {
		t.Fatalf("no token on the page (%v)", err)
	}
	up := s.srv.URL + "/s/" + l.Hash + "/upload"
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>evil</title><body>
<form id="f" method="post" enctype="multipart/form-data" action="%[1]s"><input type="hidden" name="csrf" value="%[2]s"></form>
<script>
async function attack() {
	const fd = new FormData();
	fd.append("csrf", %[2]q);
	fd.append("file", new Blob(["by fetch"]), "by-fetch.txt");
	try { await fetch(%[1]q, {method: "POST", body: fd, mode: "no-cors", credentials: "include"}); } catch (e) {}
	document.title = "sent";
}
</script></body>`, up, tok)
	}))
	defer evil.Close()
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	step(t, ctx, chromedp.Navigate(evilURL), chromedp.WaitReady(chromedp.CSS("#f")))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`attack().then(() => true)`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	// The form, submitted by the page: the browser lands on berth's answer.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("f").submit(), true`)); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, chromedp.WaitVisible(chromedp.CSS("#problem")))
	if got := text(t, ctx, "#problem"); got != "Form expired" {
		t.Errorf("a cross-site form's upload answered %q, want Form expired", got)
	}
	kids, _, err := s.st.FS.List(context.Background(), s.root.ID, s.docs.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if k.Name == "by-fetch.txt" {
			t.Error("a cross-site fetch uploaded by-fetch.txt")
		}
	}
}
