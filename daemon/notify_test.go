package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/berthtest"
	"berth/config"
	"berth/mail/mailtest"
	"berth/rest"
	"berth/share"

	"github.com/prometheus/client_golang/prometheus"
)

// arrived is one mail as its recipient reads it.
type arrived struct{ to, subject, body string }

// readMail decodes the i-th message the server took.
func readMail(t *testing.T, m mailtest.Message) arrived {
	t.Helper()
	msg, err := m.Parsed()
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		r = quotedprintable.NewReader(r)
	}
	body, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return arrived{to: strings.Join(m.To, ","), subject: subject, body: string(body)}
}

// TestNotificationMails is issue 13's "notification e-mails arrive": the
// daemon's notifier, wired as serve wires it (share.Options.Notifier,
// rest.Options.Invite), sends through a real SMTP server on loopback the
// creator's notice of a download through a link with download_notify and
// of an upload through a link with upload_notify, each naming the file and
// giving the link's url, and an organization share's invitation with its
// token to a new external subscriber.
func TestNotificationMails(t *testing.T) {
	smtpd := mailtest.Start(t, mailtest.Options{})
	logs := &berthtest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	cfg := config.Default().SMTP
	cfg.Host, cfg.Port, cfg.Security, cfg.From, cfg.Timeout = smtpd.Host, smtpd.Port, "none", "berth@files.example.org", 5*time.Second
	mailer, err := newMailNotifier(cfg, log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mailer.Close(context.Background()) })

	st := berthtest.New(t, berthtest.Options{Logger: log})
	const public = "https://files.example.org"
	shares := share.New(share.Options{FS: st.FS, Accounts: st.Accounts, Notifier: mailer, PublicURL: public})
	srv := httptest.NewTLSServer(rest.New(rest.Options{Logger: log, FS: st.FS, Accounts: st.Accounts, Share: shares,
		Invite: mailer.invite, PublicURL: public}))
	t.Cleanup(srv.Close)
	alice, root, token := st.AddPerson(t, "alice", "correct horse battery")

	do := func(method, path, token, ct string, body io.Reader) []byte {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}
	form := func(path, token string, f url.Values) []byte {
		t.Helper()
		return do(http.MethodPost, path, token, "application/x-www-form-urlencoded", strings.NewReader(f.Encode()))
	}
	upload := func(path, token, name, content string) []byte {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		part, _ := mw.CreateFormFile("file", name)
		io.WriteString(part, content)
		mw.Close()
		return do(http.MethodPost, path, token, mw.FormDataContentType(), &buf)
	}
	var obj struct {
		ID   uint64 `json:"id"`
		Hash string `json:"hash"`
		URL  string `json:"url"`
	}
	next := func(n int) arrived {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ms, err := smtpd.Wait(ctx, n)
		if err != nil {
			t.Fatalf("mail %d did not arrive: %v\n%s", n, err, logs)
		}
		return readMail(t, ms[n-1])
	}

	t.Run("download notice", func(t *testing.T) {
		json.Unmarshal(upload(fmt.Sprintf("/api/2/files/%d/upload", root.ID), token, "Rapport annuel.pdf", "report"), &obj)
		json.Unmarshal(form(fmt.Sprintf("/api/2/files/%d/%d/share", root.ID, obj.ID), token, url.Values{"download_notify": {"true"}}), &obj)
		if obj.URL != public+"/s/"+obj.Hash {
			t.Fatalf("url %q", obj.URL)
		}
		if got := do(http.MethodGet, "/api/2/sharelinks/"+obj.Hash+"/download", "", "", nil); string(got) != "report" {
			t.Fatalf("download: %q", got)
		}
		m := next(1)
		if m.to != alice.Email || !strings.Contains(m.subject, "Rapport annuel.pdf") || !strings.Contains(m.body, obj.URL) {
			t.Fatalf("notice: %+v, want to %s, subject naming the file, body with %s", m, alice.Email, obj.URL)
		}
	})
	t.Run("upload notice", func(t *testing.T) {
		json.Unmarshal(form(fmt.Sprintf("/api/2/files/%d/create_folder", root.ID), token, url.Values{"name": {"Drop box"}}), &obj)
		json.Unmarshal(form(fmt.Sprintf("/api/2/files/%d/folder/%d/share", root.ID, obj.ID), token,
			url.Values{"upload_notify": {"true"}, "write_access": {"true"}, "anon_edit": {"true"}}), &obj)
		upload("/api/2/sharelinks/"+obj.Hash+"/files/upload", "", "photo 1.jpg", "jpeg")
		m := next(2)
		if m.to != alice.Email || !strings.Contains(m.subject, "photo 1.jpg") || !strings.Contains(m.body, obj.URL) || !strings.Contains(m.body, "Drop box") {
			t.Fatalf("notice: %+v, want to %s, subject naming the file, body with %s and the folder", m, alice.Email, obj.URL)
		}
	})
	// A link's new e-mail subscriber gets its own URL, the one way it
	// opens a login_required link.
	t.Run("link subscriber", func(t *testing.T) {
		json.Unmarshal(upload(fmt.Sprintf("/api/2/files/%d/upload", root.ID), token, "Plan.txt", "plan"), &obj)
		json.Unmarshal(form(fmt.Sprintf("/api/2/files/%d/%d/share", root.ID, obj.ID), token, url.Values{"login_required": {"true"}}), &obj)
		var sb struct {
			URL string `json:"url"`
		}
		json.Unmarshal(form(fmt.Sprintf("/api/2/sharelinks/%d/subscribers", obj.ID), token,
			url.Values{"subscriber_type": {"email"}, "email": {"partner@elsewhere.example"}}), &sb)
		m := next(3)
		if m.to != "partner@elsewhere.example" || sb.URL == "" || !strings.Contains(m.body, sb.URL) || !strings.Contains(m.subject, "Plan.txt") {
			t.Fatalf("subscriber mail: %+v, want to partner@elsewhere.example naming Plan.txt with %q", m, sb.URL)
		}
	})
	t.Run("organization share invitation", func(t *testing.T) {
		ctx := context.Background()
		admin, err := st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: st.Org.ID, Username: "admin",
			Email: "admin@example.com", Password: "correct horse battery", Admin: true})
		if err != nil {
			t.Fatal(err)
		}
		toks, err := st.Accounts.IssueTokens(ctx, admin.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		org := fmt.Sprintf("/api/2/organization/%d", st.Org.ID)
		json.Unmarshal(form(org+"/shares/create", toks.AccessToken, url.Values{"name": {"Team"}}), &obj)
		form(fmt.Sprintf("%s/share/%d/subscribers/update", org, obj.ID), toks.AccessToken, url.Values{"external_subscribers": {`["guest@elsewhere.example"]`}})
		m := next(4)
		const marker = "token="
		i := strings.Index(m.body, marker)
		if m.to != "guest@elsewhere.example" || i < 0 {
			t.Fatalf("invitation: %+v", m)
		}
		tok := strings.Fields(m.body[i+len(marker):])[0]
		got := form("/api/2/shares/accept", "", url.Values{"token": {tok}})
		if !bytes.Contains(got, []byte(`"email":"guest@elsewhere.example"`)) {
			t.Fatalf("accept with the mailed token: %s", got)
		}
	})
}
