package webdav_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth/vfs"
)

// TestLock: LOCK, UNLOCK and refresh; exclusive and shared locks, their
// scope and timeout, whose token opens what, the bounds on owners and
// counts, and how locks meet COPY and MOVE. A row per case, each on a
// fresh server.
func TestLock(t *testing.T) {
	runCases(t, []davCase{
		// A lock taken the way REST takes it refuses WebDAV writes and shows
		// in lockdiscovery; a WebDAV LOCK shows in vfs, refuses REST-style
		// writes, and lets through a PUT that submits its token. Formerly
		// TestRESTAndWebDAVShareOneLock (webdav_test.go).
		{"REST and WebDAV share one lock", func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			st, _, body := f.do("PUT", "/doc.txt", strings.NewReader("v1"))
			want(t, "PUT", st, http.StatusCreated, body)
			n, err := f.lookup("/doc.txt")
			if err != nil {
				t.Fatal(err)
			}
			// A lock taken the way REST takes it (someone else's) refuses WebDAV writes.
			lk, err := f.fs.Lock(ctx, f.root.ID, n.ID, vfs.LockRequest{Owner: "person:999", Holder: "person:999", Duration: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			st, _, body = f.do("PUT", "/doc.txt", strings.NewReader("v2"))
			want(t, "PUT over a REST lock", st, http.StatusLocked, body)
			st, _, body = f.do("DELETE", "/doc.txt", nil)
			want(t, "DELETE over a REST lock", st, http.StatusLocked, body)
			st, _, body = f.do("PROPFIND", "/doc.txt", strings.NewReader(propfindAll), "Depth", "0")
			want(t, "PROPFIND", st, http.StatusMultiStatus, body)
			contains(t, body, "<D:lockdiscovery><D:activelock>", lk.Token)
			if err := f.fs.Unlock(ctx, f.root.ID, n.ID, lk.Token); err != nil {
				t.Fatal(err)
			}

			// A WebDAV lock shows as locked to REST and refuses writes without its token.
			st, h, body := f.do("LOCK", "/doc.txt", strings.NewReader(lockExclusiveOwned), "Timeout", "Second-600")
			want(t, "LOCK", st, http.StatusOK, body)
			tok := h.Get("Lock-Token")
			if !strings.HasPrefix(tok, "<urn:uuid:") {
				t.Fatalf("Lock-Token %q is not a urn:uuid URI", tok)
			}
			if n, _ = f.fs.Stat(ctx, f.root.ID, n.ID); !n.Locked() {
				t.Fatal("WebDAV LOCK does not show in vfs (REST's is_locked)")
			}
			if _, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, "doc.txt", strings.NewReader("rest"), vfs.WriteOptions{Principal: "person:" + strconv.FormatUint(f.person.ID, 10)}); !errors.Is(err, vfs.ErrLocked) {
				t.Fatalf("REST-style write over a WebDAV lock: %v, want ErrLocked", err)
			}
			st, _, body = f.do("PUT", "/doc.txt", strings.NewReader("no token"))
			want(t, "PUT without the token", st, http.StatusLocked, body)
			st, _, body = f.do("PUT", "/doc.txt", strings.NewReader("v3"), "If", "("+tok+")")
			want(t, "PUT with the token", st, http.StatusNoContent, body)
			st, _, body = f.do("UNLOCK", "/doc.txt", nil, "Lock-Token", tok)
			want(t, "UNLOCK", st, http.StatusNoContent, body)
			if n, _ = f.fs.Stat(ctx, f.root.ID, n.ID); n.Locked() {
				t.Fatal("still locked after UNLOCK")
			}
		}},

		// A LOCK of a missing name creates an empty file and locks it; when
		// the lock is refused (here by the caller's own exclusive
		// depth-infinity lock on the folder, whose token lets the write
		// through but not a second exclusive lock below it), no empty file is
		// left behind. Formerly TestLockNewNameRefusedCreatesNothing
		// (locknew_test.go).
		{"a refused LOCK of a new name creates nothing", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("MKCOL", "/d", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			st, h, body := f.do("LOCK", "/d", strings.NewReader(lockExclusiveOwned))
			want(t, "LOCK /d", st, http.StatusOK, body)
			tok := h.Get("Lock-Token")
			st, _, body = f.do("LOCK", "/d/new.txt", strings.NewReader(lockExclusiveOwned), "If", "("+tok+")")
			want(t, "LOCK of a new name below an exclusive lock", st, http.StatusLocked, body)
			if n, err := f.lookup("/d/new.txt"); err == nil {
				t.Fatalf("a refused LOCK left %+v behind", n)
			}
			// Without the conflict, the same LOCK creates the file, locked.
			st, _, body = f.do("UNLOCK", "/d", nil, "Lock-Token", tok)
			want(t, "UNLOCK /d", st, http.StatusNoContent, body)
			st, h, body = f.do("LOCK", "/d/new.txt", strings.NewReader(lockExclusiveOwned))
			want(t, "LOCK of a new name", st, http.StatusCreated, body)
			n, err := f.lookup("/d/new.txt")
			if err != nil || n.Dir || n.Size != 0 || !n.Locked() || n.Locks[0].Token != strings.Trim(h.Get("Lock-Token"), "<>") {
				t.Fatalf("after LOCK of a new name: %+v %v", n, err)
			}
			st, _, body = f.do("PUT", "/d/new.txt", strings.NewReader("hello"))
			want(t, "PUT without the token", st, http.StatusLocked, body)
			st, _, body = f.do("PUT", "/d/new.txt", strings.NewReader("hello"), "If", "("+h.Get("Lock-Token")+")")
			want(t, "PUT with the token", st, http.StatusNoContent, body)
			if got, err := f.read("/d/new.txt"); err != nil || string(got) != "hello" {
				t.Fatalf("new.txt: %q %v", got, err)
			}
		}},

		// A file a LOCK creates empty has a revision of its own, as a PUT's
		// has: two such files never share an ETag, and a write conditional
		// on one's ETag holds at its commit (vfs.WriteOptions.IfRevision)
		// and cannot replace a revision that came after the check.
		{"a file a LOCK creates has an ETag of its own", func(t *testing.T) {
			f := newFixture(t)
			var etags []string
			var tokens []string
			for _, p := range []string{"/l1.txt", "/l2.txt"} {
				st, h, body := f.do("LOCK", p, strings.NewReader(lockExclusiveOwned))
				want(t, "LOCK "+p, st, http.StatusCreated, body)
				n, err := f.lookup(p)
				if err != nil || n.RevisionID == 0 {
					t.Fatalf("%s: %+v %v; want a revision", p, n, err)
				}
				st, _, body = f.do("PROPFIND", p, strings.NewReader(propfindAll), "Depth", "0")
				want(t, "PROPFIND "+p, st, http.StatusMultiStatus, body)
				contains(t, body, "<D:getetag>"+n.ETag()+"</D:getetag>")
				etags, tokens = append(etags, n.ETag()), append(tokens, h.Get("Lock-Token"))
			}
			if etags[0] == etags[1] {
				t.Fatalf("two files created by LOCK share the ETag %s", etags[0])
			}
			st, _, body := f.do("PUT", "/l1.txt", strings.NewReader("x"), "If", "("+tokens[0]+")", "If-Match", etags[1])
			want(t, "PUT with the other file's ETag", st, http.StatusPreconditionFailed, body)
			pr, pw := io.Pipe()
			done := make(chan int)
			go func() {
				st, _, _ := f.do("PUT", "/l1.txt", pr, "If", "("+tokens[0]+")", "If-Match", etags[0])
				done <- st
			}()
			if _, err := pw.Write([]byte("slow ")); err != nil { // the handler is reading the body
				t.Fatal(err)
			}
			st, _, body = f.do("PUT", "/l1.txt", strings.NewReader("meanwhile"), "If", "("+tokens[0]+")")
			want(t, "PUT meanwhile", st, http.StatusNoContent, body)
			pw.Write([]byte("upload"))
			pw.Close()
			if st := <-done; st != http.StatusPreconditionFailed {
				t.Errorf("the slow PUT with If-Match of the created file's ETag got %d, want 412", st)
			}
			if got, err := f.read("/l1.txt"); err != nil || string(got) != "meanwhile" {
				t.Errorf("l1.txt is %q, %v; want the write that landed meanwhile", got, err)
			}
		}},

		// RFC 4918 9.11, the UNLOCK Request-URI "MUST identify a resource
		// within the scope of the lock" (409 lock-token-matches-request-uri
		// otherwise), and a refresh names the lock of the resource it is sent
		// to. A depth-0 lock on a folder does not cover what the folder holds,
		// yet an UNLOCK or a refresh sent to a member reached it; a
		// depth-infinity lock does cover its members. Formerly
		// TestUnlockAndRefreshWithinTheLocksScope (lockscope_test.go).
		{"UNLOCK and refresh only within the scope of the lock", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("MKCOL", "/d", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", "/d/x.txt", strings.NewReader("x"))
			want(t, "PUT", st, http.StatusCreated, body)
			st, h, body := f.do("LOCK", "/d", strings.NewReader(lockExclusive), "Depth", "0")
			want(t, "LOCK d depth 0", st, http.StatusOK, body)
			tok := h.Get("Lock-Token")
			st, _, body = f.do("LOCK", "/d/x.txt", nil, "If", "("+tok+")", "Timeout", "Second-60")
			want(t, "refresh sent to a member of a depth-0 lock", st, http.StatusPreconditionFailed, body)
			st, _, body = f.do("UNLOCK", "/d/x.txt", nil, "Lock-Token", tok)
			want(t, "UNLOCK sent to a member of a depth-0 lock", st, http.StatusConflict, body)
			contains(t, body, "lock-token-matches-request-uri")
			if n, err := f.lookup("/d"); err != nil || !n.Locked() {
				t.Fatalf("d after an UNLOCK outside its lock's scope: %+v %v", n.Locks, err)
			}
			st, _, body = f.do("UNLOCK", "/d", nil, "Lock-Token", tok)
			want(t, "UNLOCK d", st, http.StatusNoContent, body)

			st, h, body = f.do("LOCK", "/d", strings.NewReader(lockExclusive), "Depth", "infinity")
			want(t, "LOCK d depth infinity", st, http.StatusOK, body)
			tok = h.Get("Lock-Token")
			st, _, body = f.do("LOCK", "/d/x.txt", nil, "If", "("+tok+")", "Timeout", "Second-60")
			want(t, "refresh sent to a member of a depth-infinity lock", st, http.StatusOK, body)
			st, _, body = f.do("UNLOCK", "/d/x.txt", nil, "Lock-Token", tok)
			want(t, "UNLOCK sent to a member of a depth-infinity lock", st, http.StatusNoContent, body)
		}},

		// A member's lockdiscovery shows the deep locks of the folders
		// above it, each with its lockroot, nearest first, and not a
		// depth-0 lock of a folder above (vfs.DeepLocksAbove, one read
		// of the folders above where a Stat of each resolved its path).
		{"lockdiscovery of a member shows the deep locks above it", func(t *testing.T) {
			const lockSharedBody = `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
			f := newFixture(t)
			for _, p := range []string{"/a", "/a/b", "/a/b/c"} {
				st, _, body := f.do("MKCOL", p, nil)
				want(t, "MKCOL "+p, st, http.StatusCreated, body)
			}
			st, _, body := f.do("PUT", "/a/b/c/x.txt", strings.NewReader("x"))
			want(t, "PUT", st, http.StatusCreated, body)
			st, h, body := f.do("LOCK", "/a", strings.NewReader(lockSharedBody), "Depth", "infinity")
			want(t, "LOCK a", st, http.StatusOK, body)
			top := h.Get("Lock-Token")
			st, h, body = f.do("LOCK", "/a/b", strings.NewReader(lockSharedBody), "Depth", "infinity")
			want(t, "LOCK a/b", st, http.StatusOK, body)
			mid := h.Get("Lock-Token")
			st, h, body = f.do("LOCK", "/a/b/c", strings.NewReader(lockSharedBody), "Depth", "0")
			want(t, "LOCK a/b/c depth 0", st, http.StatusOK, body)
			shallow := h.Get("Lock-Token")
			lockdiscovery := `<D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>`
			st, _, body = f.do("PROPFIND", "/a/b/c/x.txt", strings.NewReader(lockdiscovery), "Depth", "0")
			want(t, "PROPFIND", st, http.StatusMultiStatus, body)
			contains(t, body, strings.Trim(mid, "<>")+"</D:href></D:locktoken><D:lockroot><D:href>/webdav/alice/a/b/</D:href>",
				strings.Trim(top, "<>")+"</D:href></D:locktoken><D:lockroot><D:href>/webdav/alice/a/</D:href>")
			if strings.Index(body, strings.Trim(mid, "<>")) > strings.Index(body, strings.Trim(top, "<>")) {
				t.Fatalf("the nearer lock comes after the farther one:\n%s", body)
			}
			if strings.Contains(body, strings.Trim(shallow, "<>")) {
				t.Fatalf("a depth-0 lock of the folder above shows on its member:\n%s", body)
			}
		}},

		// However large the Timeout a LOCK or a refresh asks for, the lock
		// expires within the 7-day bound. Second-N times a second overflowed
		// for N over some 9.2e9 and wrapped to a negative duration, which vfs
		// takes as "never expires". Formerly TestLockTimeoutBounded
		// (locktimeout_test.go).
		{"a lock expires within 7 days", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
			want(t, "PUT", st, http.StatusCreated, body)
			week := 7 * 24 * time.Hour
			check := func(what string, body string) {
				t.Helper()
				n, err := f.lookup("/a.txt")
				if err != nil || len(n.Locks) != 1 {
					t.Fatalf("%s: locks %+v, %v", what, n.Locks, err)
				}
				exp := n.Locks[0].Expires
				if exp.IsZero() || time.Until(exp) > week || time.Until(exp) < week-time.Minute {
					t.Fatalf("%s: the lock expires at %v, want in about 7 days", what, exp)
				}
				if strings.Contains(body, "Infinite") {
					t.Fatalf("%s: answer says Infinite:\n%s", what, body)
				}
			}
			for _, timeout := range []string{"Second-10000000000", "Second-9223372036854775807", "Second-99999999999999999999999"} {
				st, h, body := f.do("LOCK", "/a.txt", strings.NewReader(lockExclusive), "Timeout", timeout)
				want(t, "LOCK "+timeout, st, http.StatusOK, body)
				check("LOCK "+timeout, body)
				tok := h.Get("Lock-Token")
				st, _, body = f.do("LOCK", "/a.txt", nil, "If", "("+tok+")", "Timeout", "Second-60")
				want(t, "refresh", st, http.StatusOK, body)
				st, _, body = f.do("LOCK", "/a.txt", nil, "If", "("+tok+")", "Timeout", timeout)
				want(t, "refresh "+timeout, st, http.StatusOK, body)
				check("refresh "+timeout, body)
				n, _ := f.lookup("/a.txt")
				if err := f.fs.Unlock(context.Background(), f.root.ID, n.ID, ""); err != nil {
					t.Fatal(err)
				}
			}
		}},

		// Two clients each hold a shared lock on a file; each writes with its
		// own token (RFC 4918 6.2), where berth used to want the tokens of
		// every shared lock, so neither could. Formerly
		// TestSharedLocksOneTokenWrites (sharedlock_test.go).
		{"each shared lock writes with its own token", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("PUT", "/s.txt", strings.NewReader("0"))
			want(t, "PUT", st, http.StatusCreated, body)
			shared := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
			var toks []string
			for range 2 {
				st, h, body := f.do("LOCK", "/s.txt", strings.NewReader(shared))
				want(t, "shared LOCK", st, http.StatusOK, body)
				toks = append(toks, h.Get("Lock-Token"))
			}
			for i, tok := range toks {
				st, _, body = f.do("PUT", "/s.txt", strings.NewReader("by "+tok), "If", "("+tok+")")
				want(t, "PUT with one shared lock's token", st, http.StatusNoContent, body)
				if b, _ := f.read("/s.txt"); string(b) != "by "+toks[i] {
					t.Fatalf("s.txt = %q", b)
				}
			}
			st, _, body = f.do("PUT", "/s.txt", strings.NewReader("none"))
			want(t, "PUT without a token", st, http.StatusLocked, body)
		}},

		// RFC 4918 6.4 has the server check that whoever submits a lock token
		// is the lock's creator. No second person reaches alice's root over
		// WebDAV yet, so the other principal's lock is taken through vfs
		// exactly as berth's LOCK takes one (holder, token required): alice
		// submitting its token may not write through it, refresh it or remove
		// it, and her own token still works, over Basic and Bearer. Formerly
		// TestLockTokenOfAnotherPrincipal (tokenholder_test.go).
		{"the token of another person opens nothing", func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			st, _, body := f.do("PUT", "/doc.txt", strings.NewReader("v1"))
			want(t, "PUT", st, http.StatusCreated, body)
			n, err := f.lookup("/doc.txt")
			if err != nil {
				t.Fatal(err)
			}
			bobs, err := f.fs.Lock(ctx, f.root.ID, n.ID, vfs.LockRequest{Owner: "<D:href>bob</D:href>", Holder: "person:999",
				Duration: time.Minute, TokenRequired: true})
			if err != nil {
				t.Fatal(err)
			}
			tok := "<" + bobs.Token + ">"
			st, _, body = f.do("PUT", "/doc.txt", strings.NewReader("alice"), "If", "("+tok+")")
			want(t, "PUT with another person's token", st, http.StatusLocked, body)
			st, _, body = f.do("DELETE", "/doc.txt", nil, "If", "("+tok+")")
			want(t, "DELETE with another person's token", st, http.StatusLocked, body)
			st, _, body = f.do("MOVE", "/doc.txt", nil, "If", "("+tok+")", "Destination", f.url("/moved.txt"))
			want(t, "MOVE with another person's token", st, http.StatusLocked, body)
			st, _, body = f.do("LOCK", "/doc.txt", nil, "If", "("+tok+")", "Timeout", "Second-3600")
			want(t, "LOCK refresh of another person's lock", st, http.StatusForbidden, body)
			st, _, body = f.do("UNLOCK", "/doc.txt", nil, "Lock-Token", tok)
			want(t, "UNLOCK of another person's lock", st, http.StatusForbidden, body)
			if b, err := f.read("/doc.txt"); err != nil || string(b) != "v1" {
				t.Fatalf("doc.txt after refused writes: %q %v", b, err)
			}
			if l, err := f.fs.Stat(ctx, f.root.ID, n.ID); err != nil || len(l.Locks) != 1 || !l.Locks[0].Expires.Equal(bobs.Expires) {
				t.Fatalf("bob's lock after alice's refresh and unlock: %+v %v", l.Locks, err)
			}
			if err := f.fs.Unlock(ctx, f.root.ID, n.ID, bobs.Token); err != nil {
				t.Fatal(err)
			}

			// Alice's own lock: her token works, whichever credentials she sends.
			st, h, body := f.do("LOCK", "/doc.txt", strings.NewReader(lockExclusive))
			want(t, "LOCK", st, http.StatusOK, body)
			mine := h.Get("Lock-Token")
			req, _ := http.NewRequest("PUT", f.url("/doc.txt"), strings.NewReader("v2"))
			req.Header.Set("Authorization", "Bearer "+f.token)
			req.Header.Set("If", "("+mine+")")
			st, _, body = f.send(req)
			want(t, "PUT with her token over Bearer", st, http.StatusNoContent, body)
			st, _, body = f.do("LOCK", "/doc.txt", nil, "If", "("+mine+")", "Timeout", "Second-60")
			want(t, "LOCK refresh of her lock", st, http.StatusOK, body)
			if !strings.Contains(body, "<D:timeout>Second-60<") && !strings.Contains(body, "<D:timeout>Second-59<") {
				t.Fatalf("refresh did not set the timeout asked for:\n%s", body)
			}
			st, _, body = f.do("UNLOCK", "/doc.txt", nil, "Lock-Token", mine)
			want(t, "UNLOCK of her lock", st, http.StatusNoContent, body)
		}},

		// An owner over vfs.MaxLockOwnerBytes and a lock past vfs.MaxLocks on
		// one item are 507 and store nothing, where they grew the item without
		// bound. Formerly TestLockOwnerAndCountLimits (limits_test.go).
		{"lock owners and lock counts are bounded", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("PUT", "/l.txt", strings.NewReader("x"))
			want(t, "PUT", st, http.StatusCreated, body)
			lock := func(owner string) (int, string) {
				st, _, body := f.do("LOCK", "/l.txt", strings.NewReader(`<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>`+owner+`</D:owner></D:lockinfo>`))
				return st, body
			}
			st, body = lock("<D:href>" + strings.Repeat("o", vfs.MaxLockOwnerBytes) + "</D:href>")
			want(t, "LOCK with a long owner", st, http.StatusInsufficientStorage, body)
			contains(t, body, "owner")
			for i := range vfs.MaxLocks {
				st, body = lock(fmt.Sprintf("client %d", i))
				want(t, fmt.Sprintf("shared LOCK %d", i), st, http.StatusOK, body)
			}
			st, body = lock("one too many")
			want(t, "shared LOCK over the limit", st, http.StatusInsufficientStorage, body)
			n, err := f.lookup("/l.txt")
			if err != nil {
				t.Fatal(err)
			}
			if len(n.Locks) != vfs.MaxLocks {
				t.Fatalf("%d locks, want %d", len(n.Locks), vfs.MaxLocks)
			}
		}},

		// A client holds a lock on b.txt and MOVEs or COPYs another file over
		// it (as editors save: write a temporary file, move it over the
		// original). RFC 4918 7.6: what lands at a locked destination joins
		// its lock, so b.txt stays locked under the same token, which still
		// refreshes and unlocks it; it used to vanish with the item replaced.
		// Formerly TestOverwriteKeepsDestinationLock (destlock_test.go).
		{"what lands on a locked destination joins its lock", func(t *testing.T) {
			f := newFixture(t)
			for _, method := range []string{"MOVE", "COPY"} {
				for _, p := range []string{"/tmp.txt", "/b.txt"} {
					st, _, body := f.do("PUT", p, strings.NewReader("contents of "+p))
					if st != http.StatusCreated && st != http.StatusNoContent {
						t.Fatalf("PUT %s: %d %s", p, st, body)
					}
				}
				st, h, body := f.do("LOCK", "/b.txt", strings.NewReader(lockExclusive))
				want(t, "LOCK b.txt", st, http.StatusOK, body)
				tok := h.Get("Lock-Token")
				st, _, body = f.do(method, "/tmp.txt", nil, "Destination", f.url("/b.txt"), "If", "<"+f.url("/b.txt")+"> ("+tok+")")
				want(t, method+" over the locked b.txt", st, http.StatusNoContent, body)
				if b, err := f.read("/b.txt"); err != nil || string(b) != "contents of /tmp.txt" {
					t.Fatalf("%s: b.txt is %q, %v", method, b, err)
				}
				st, _, body = f.do("PUT", "/b.txt", strings.NewReader("no token"))
				want(t, method+": PUT b.txt without the token", st, http.StatusLocked, body)
				st, _, body = f.do("LOCK", "/b.txt", nil, "If", "("+tok+")")
				want(t, method+": refresh of b.txt's lock", st, http.StatusOK, body)
				st, _, body = f.do("UNLOCK", "/b.txt", nil, "Lock-Token", tok)
				want(t, method+": UNLOCK b.txt", st, http.StatusNoContent, body)
			}
		}},

		// A MOVE of a collection moves its members, so a locked member refuses
		// it (423) unless its token is submitted (RFC 4918 9.9.4); the lock
		// holder would otherwise find the file gone from the URL it locked.
		// Formerly TestMoveCollectionWithLockedMember (movelocked_test.go).
		{"a locked member refuses the MOVE of its collection", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("MKCOL", "/d", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", "/d/x.txt", strings.NewReader("x"))
			want(t, "PUT", st, http.StatusCreated, body)
			st, h, body := f.do("LOCK", "/d/x.txt", strings.NewReader(lockExclusive))
			want(t, "LOCK", st, http.StatusOK, body)
			tok := h.Get("Lock-Token")
			st, _, body = f.do("MOVE", "/d", nil, "Destination", f.url("/e"))
			want(t, "MOVE without the member's token", st, http.StatusLocked, body)
			if got, err := f.read("/d/x.txt"); err != nil || string(got) != "x" {
				t.Fatalf("d/x.txt after a refused MOVE: %q %v", got, err)
			}
			st, _, body = f.do("MOVE", "/d", nil, "Destination", f.url("/e"), "If", "<"+f.url("/d/x.txt")+"> ("+tok+")")
			want(t, "MOVE with the member's token", st, http.StatusCreated, body)
			if got, err := f.read("/e/x.txt"); err != nil || string(got) != "x" {
				t.Fatalf("e/x.txt after the MOVE: %q %v", got, err)
			}
		}},

		// RFC 4918 7.6, "a successful MOVE request on a write locked resource
		// MUST NOT move the write lock with the resource"; a lock names the
		// URL it was taken on, and a lock at the destination covers what
		// arrives there. The moved file, and a locked member of a moved
		// collection, arrive unlocked; a depth-infinity lock on the
		// destination folder covers them. Formerly TestMoveLeavesLocksBehind
		// (movelockgone_test.go).
		{"a MOVE leaves its locks behind", func(t *testing.T) {
			f := newFixture(t)
			lockdiscovery := `<D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>`
			for _, c := range [][3]string{{"PUT", "/a.txt", "a"}, {"MKCOL", "/d", ""}, {"PUT", "/d/x.txt", "x"}, {"MKCOL", "/locked", ""}} {
				st, _, body := f.do(c[0], c[1], strings.NewReader(c[2]))
				want(t, c[0]+" "+c[1], st, http.StatusCreated, body)
			}
			st, h, body := f.do("LOCK", "/a.txt", strings.NewReader(lockExclusive))
			want(t, "LOCK a.txt", st, http.StatusOK, body)
			tokA := h.Get("Lock-Token")
			st, h, body = f.do("LOCK", "/d/x.txt", strings.NewReader(lockExclusive))
			want(t, "LOCK d/x.txt", st, http.StatusOK, body)
			tokX := h.Get("Lock-Token")

			st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.url("/b.txt"), "If", "("+tokA+")")
			want(t, "MOVE a.txt with its token", st, http.StatusCreated, body)
			st, _, body = f.do("MOVE", "/d", nil, "Destination", f.url("/e"), "If", "<"+f.url("/d/x.txt")+"> ("+tokX+")")
			want(t, "MOVE d with its member's token", st, http.StatusCreated, body)
			for _, p := range []string{"/b.txt", "/e/x.txt"} {
				st, _, body = f.do("PROPFIND", p, strings.NewReader(lockdiscovery), "Depth", "0")
				want(t, "PROPFIND "+p, st, http.StatusMultiStatus, body)
				contains(t, body, "<D:lockdiscovery/>")
				st, _, body = f.do("PUT", p, strings.NewReader("free"))
				want(t, "PUT "+p+" without a token", st, http.StatusNoContent, body)
			}
			st, _, body = f.do("UNLOCK", "/b.txt", nil, "Lock-Token", tokA)
			want(t, "UNLOCK of the lock left behind at the new URL", st, http.StatusConflict, body)

			// A lock at the destination covers what arrives.
			st, h, body = f.do("LOCK", "/locked", strings.NewReader(lockExclusive))
			want(t, "LOCK locked/", st, http.StatusOK, body)
			tokL := h.Get("Lock-Token")
			st, _, body = f.do("MOVE", "/b.txt", nil, "Destination", f.url("/locked/b.txt"), "If", "<"+f.url("/locked")+"> ("+tokL+")")
			want(t, "MOVE into the locked folder with its token", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", "/locked/b.txt", strings.NewReader("no"))
			want(t, "PUT below the destination's lock without its token", st, http.StatusLocked, body)
		}},
		// A lock ended by its root's manager (REST's unlock with force,
		// which removes every lock of the item) leaves its client's token
		// naming nothing: the client's next PUT, DELETE or UNLOCK with it
		// fails cleanly and writes nothing, as after an expiry.
		{"a lock ended by force: its token opens nothing", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("MKCOL", "/d", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", "/d/a.txt", strings.NewReader("v1"))
			want(t, "PUT", st, http.StatusCreated, body)
			for _, p := range []string{"/d/a.txt", "/d"} {
				st, h, body := f.do("LOCK", p, strings.NewReader(lockExclusive), "Depth", "infinity")
				want(t, "LOCK "+p, st, http.StatusOK, body)
				tok := h.Get("Lock-Token")
				n, err := f.lookup(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.fs.Unlock(context.Background(), f.root.ID, n.ID, ""); err != nil {
					t.Fatal(err)
				}
				st, _, body = f.do("PUT", "/d/a.txt", strings.NewReader("stale"), "If", "("+tok+")")
				want(t, "PUT with the ended lock's token ("+p+")", st, http.StatusPreconditionFailed, body)
				st, _, body = f.do("PUT", "/d/new.txt", strings.NewReader("stale"), "If", "<"+f.url(p)+"> ("+tok+")")
				want(t, "PUT of a new file with the ended lock's tagged token ("+p+")", st, http.StatusPreconditionFailed, body)
				st, _, body = f.do("DELETE", "/d/a.txt", nil, "If", "("+tok+")")
				want(t, "DELETE with the ended lock's token ("+p+")", st, http.StatusPreconditionFailed, body)
				st, _, body = f.do("UNLOCK", p, nil, "Lock-Token", tok)
				want(t, "UNLOCK of the ended lock ("+p+")", st, http.StatusConflict, body)
				if b, err := f.read("/d/a.txt"); err != nil || string(b) != "v1" {
					t.Fatalf("a.txt = %q, %v after writes with an ended lock's token", b, err)
				}
				if _, err := f.lookup("/d/new.txt"); !errors.Is(err, vfs.ErrNotExist) {
					t.Fatalf("new.txt written with an ended lock's token: %v", err)
				}
			}
		}},
	})
}
