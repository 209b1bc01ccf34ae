package mail_test

import (
	"context"
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"strings"
	"testing"
	"time"

	"berth/mail"
	"berth/mail/mailtest"
)

// TestSend sends through a real SMTP server on loopback in each security
// mode and reads what arrived: recipient, subject, body, headers.
func TestSend(t *testing.T) {
	const body = "Hello,\nAlice shared «Reports» with you:\nhttps://berth.example/s/abc\n\n-- \nberth\n"
	for _, tc := range []struct {
		name    string
		server  mailtest.Options
		sec     mail.Security
		user    string
		pass    string
		subject string
		to      string
		wantErr error
	}{
		{name: "plain", sec: mail.None, subject: "A share for you"},
		{name: "starttls", server: mailtest.Options{TLS: mailtest.StartTLS}, sec: mail.StartTLS, subject: "A share for you"},
		{name: "implicit tls", server: mailtest.Options{TLS: mailtest.Implicit}, sec: mail.TLS, subject: "A share for you"},
		{name: "auth over starttls", server: mailtest.Options{TLS: mailtest.StartTLS, Username: "berth", Password: "s3cret pass"},
			sec: mail.StartTLS, user: "berth", pass: "s3cret pass", subject: "Authenticated"},
		{name: "auth over implicit tls", server: mailtest.Options{TLS: mailtest.Implicit, Username: "berth", Password: "pw"},
			sec: mail.TLS, user: "berth", pass: "pw", subject: "Authenticated"},
		{name: "auth in the clear on loopback", server: mailtest.Options{Username: "berth", Password: "pw"},
			sec: mail.None, user: "berth", pass: "pw", subject: "Loopback"},
		{name: "non-ASCII subject", sec: mail.None, subject: "Jürgen a partagé « Rapports 2026 » avec vous — 日本語のファイル名も長く続きます"},
		{name: "display name recipient", sec: mail.None, subject: "Hi", to: "Zoë Example <zoe@example.org>"},
		{name: "wrong password", server: mailtest.Options{TLS: mailtest.StartTLS, Username: "berth", Password: "right"},
			sec: mail.StartTLS, user: "berth", pass: "wrong", subject: "x", wantErr: mail.ErrAuth},
		{name: "auth required, none configured", server: mailtest.Options{TLS: mailtest.StartTLS, Username: "berth", Password: "right"},
			sec: mail.StartTLS, subject: "x", wantErr: mail.ErrRefused},
		{name: "starttls not offered", sec: mail.StartTLS, subject: "x", wantErr: mail.ErrTLS},
		{name: "tls to a plain server", sec: mail.TLS, subject: "x", wantErr: mail.ErrTLS},
		{name: "header injection in subject", sec: mail.None, subject: "Hi\r\nBcc: victim@example.org", wantErr: mail.ErrBadSubject},
		{name: "bare LF in subject", sec: mail.None, subject: "Hi\nX-Evil: 1", wantErr: mail.ErrBadSubject},
		{name: "header injection in recipient", sec: mail.None, subject: "Hi", to: "bob@example.org\r\nBcc: victim@example.org", wantErr: mail.ErrBadAddress},
		{name: "two recipients", sec: mail.None, subject: "Hi", to: "bob@example.org, eve@example.org", wantErr: mail.ErrBadAddress},
		{name: "not an address", sec: mail.None, subject: "Hi", to: "bob", wantErr: mail.ErrBadAddress},
		{name: "subject too long", sec: mail.None, subject: strings.Repeat("x", 401), wantErr: mail.ErrBadSubject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mailtest.Start(t, tc.server)
			to := tc.to
			if to == "" {
				to = "bob@example.org"
			}
			s, err := mail.New(mail.Options{
				Host: srv.Host, Port: srv.Port, Security: tc.sec,
				Username: tc.user, Password: tc.pass,
				From: "Berth <berth@files.example.org>", Timeout: 5 * time.Second,
				CAFile: srv.CAFile,
			})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Send(context.Background(), mail.Message{To: to, Subject: tc.subject, Text: body})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Send: %v, want %v", err, tc.wantErr)
				}
				if got := srv.Messages(); len(got) != 0 {
					t.Fatalf("%d messages arrived, want none", len(got))
				}
				t.Logf("error, as wanted: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			msgs, err := srv.Wait(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			m := msgs[0]
			if m.From != "berth@files.example.org" || len(m.To) != 1 || !strings.HasSuffix(to, m.To[0]) && !strings.Contains(to, "<"+m.To[0]+">") {
				t.Errorf("envelope from %q to %q", m.From, m.To)
			}
			if m.TLS != (tc.sec != mail.None) {
				t.Errorf("arrived over TLS %v, want %v", m.TLS, tc.sec != mail.None)
			}
			pm, err := m.Parsed()
			if err != nil {
				t.Fatalf("not an RFC 5322 message: %v\n%s", err, m.Data)
			}
			var dec mime.WordDecoder
			subject, err := dec.DecodeHeader(pm.Header.Get("Subject"))
			if err != nil || subject != tc.subject {
				t.Errorf("subject %q (%v), want %q", subject, err, tc.subject)
			}
			for _, line := range strings.Split(string(m.Data), "\r\n") {
				if len(line) > 998 {
					t.Errorf("line of %d characters", len(line))
				}
				if strings.HasPrefix(line, "Subject:") && strings.ContainsFunc(line, func(r rune) bool { return r > 127 }) {
					t.Errorf("raw non-ASCII in %q", line)
				}
			}
			gotTo, err := pm.Header.AddressList("To")
			if err != nil || len(gotTo) != 1 || gotTo[0].Address != m.To[0] {
				t.Errorf("To header %v (%v)", gotTo, err)
			}
			if tc.to != "" && strings.HasPrefix(tc.to, "Zoë") && gotTo[0].Name != "Zoë Example" {
				t.Errorf("To name %q", gotTo[0].Name)
			}
			for _, h := range []string{"Date", "Message-Id", "From"} {
				if pm.Header.Get(h) == "" {
					t.Errorf("no %s header", h)
				}
			}
			if _, err := pm.Header.Date(); err != nil {
				t.Errorf("Date: %v", err)
			}
			if ct := pm.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if cte := pm.Header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
				t.Errorf("Content-Transfer-Encoding %q", cte)
			}
			text, err := io.ReadAll(quotedprintable.NewReader(pm.Body))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.ReplaceAll(string(text), "\r\n", "\n"); got != body {
				t.Errorf("body %q, want %q", got, body)
			}
		})
	}
}

// TestUnreachable: a closed port fails at once, and a server that takes
// the connection but never answers fails within the timeout, both with
// ErrUnreachable naming the address.
func TestUnreachable(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	// A listener that never accepts: the kernel completes the handshake,
	// and the greeting never comes.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silentPort := silent.Addr().(*net.TCPAddr).Port

	for _, tc := range []struct {
		name string
		port int
		sec  mail.Security
		ctx  time.Duration
	}{
		{"connection refused", closedPort, mail.None, 0},
		{"silent server", silentPort, mail.None, 0},
		{"silent server, tls", silentPort, mail.TLS, 0},
		{"silent server, shorter context", silentPort, mail.StartTLS, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := mail.New(mail.Options{Host: "127.0.0.1", Port: tc.port, Security: tc.sec,
				From: "berth@example.org", Timeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			start := time.Now()
			err = s.Send(ctx, mail.Message{To: "bob@example.org", Subject: "x", Text: "x"})
			took := time.Since(start)
			if !errors.Is(err, mail.ErrUnreachable) || !strings.Contains(err.Error(), "127.0.0.1:") {
				t.Fatalf("Send: %v, want ErrUnreachable naming the address", err)
			}
			if took > 3*time.Second {
				t.Fatalf("took %s; the timeout is 500ms", took)
			}
			t.Logf("%s after %s", err, took.Round(time.Millisecond))
		})
	}
}

// TestNew refuses options that could never send.
func TestNew(t *testing.T) {
	ok := mail.Options{Host: "smtp.example.org", Port: 587, Security: mail.StartTLS, From: "berth@example.org"}
	for _, tc := range []struct {
		name string
		edit func(*mail.Options)
		want string
	}{
		{"no host", func(o *mail.Options) { o.Host = "" }, "no SMTP host"},
		{"bad port", func(o *mail.Options) { o.Port = 0 }, "port"},
		{"bad security", func(o *mail.Options) { o.Security = "ssl" }, `"ssl"`},
		{"bad from", func(o *mail.Options) { o.From = "berth" }, "not an e-mail address"},
		{"missing password file", func(o *mail.Options) { o.PasswordFile = "/nonexistent/pw" }, "password file"},
		{"missing CA file", func(o *mail.Options) { o.CAFile = "/nonexistent/ca.pem" }, "CA file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			if _, err := mail.New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := mail.New(ok); err != nil {
		t.Fatal(err)
	}
}
