package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth/berthtest"
	"berth/config"
	"berth/mail"
	"berth/mail/mailtest"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMailNotifier drives the daemon's notifier as share calls it: with
// no SMTP server it says so at start and logs each mail; with one it
// delivers to a real SMTP server on loopback, from the configuration's
// keys (password file, CA file); with a dead one it logs the failure.
func TestMailNotifier(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{TLS: mailtest.StartTLS, Username: "berth", Password: "mail pass 1"})
	pwFile := filepath.Join(t.TempDir(), "smtp-password")
	if err := os.WriteFile(pwFile, []byte("mail pass 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := dead.Addr().(*net.TCPAddr).Port
	dead.Close()

	smtpOf := func(edit func(*config.SMTP)) config.SMTP {
		c := config.Default().SMTP
		edit(&c)
		return c
	}
	const subject = "Téléchargement de « Rapport »"
	const body = "\"Rapport.pdf\" was downloaded through share link 7.\n"
	for _, tc := range []struct {
		name     string
		cfg      config.SMTP
		arrives  bool
		result   string // the berth_mail_total series that counts the first Notify
		wantLogs []string
	}{
		{
			name:     "no server",
			cfg:      config.Default().SMTP,
			result:   "unsent",
			wantLogs: []string{`msg="no SMTP server configured: e-mail notifications are not sent"`, `msg="e-mail not sent: no SMTP server configured" to=alice@example.org subject="` + subject + `"`},
		},
		{
			name: "starttls with auth",
			cfg: smtpOf(func(c *config.SMTP) {
				c.Host, c.Port, c.Security, c.Username, c.PasswordFile = srv.Host, srv.Port, "starttls", "berth", pwFile
				c.From, c.CAFile, c.Timeout = "Berth <berth@files.example.org>", srv.CAFile, 5*time.Second
			}),
			arrives:  true,
			result:   "sent",
			wantLogs: []string{`msg="e-mail goes through SMTP server" server=` + srv.Addr() + ` security=starttls auth=true`, `msg="e-mail sent" to=alice@example.org`},
		},
		{
			name: "server down",
			cfg: smtpOf(func(c *config.SMTP) {
				c.Host, c.Port, c.Security, c.From, c.Timeout = "127.0.0.1", deadPort, "none", "berth@example.org", time.Second
			}),
			result:   "failed",
			wantLogs: []string{`msg="e-mail not sent" to=alice@example.org`, "SMTP server unreachable", "connection refused"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			reg := prometheus.NewRegistry()
			n, err := newMailNotifier(tc.cfg, log, reg)
			if err != nil {
				t.Fatal(err)
			}
			before := len(srv.Messages())
			if err := n.Notify(context.Background(), "alice@example.org", subject, body); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			// Refused before queueing, whatever the server.
			if err := n.Notify(context.Background(), "alice@example.org\r\nBcc: eve@example.org", subject, body); !errors.Is(err, mail.ErrBadAddress) {
				t.Errorf("Notify with a line break in the address: %v", err)
			}
			if err := n.Notify(context.Background(), "alice@example.org", "x\nBcc: eve@example.org", body); !errors.Is(err, mail.ErrBadSubject) {
				t.Errorf("Notify with a line break in the subject: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n.Close(ctx)
			n.Close(ctx) // twice is harmless
			if err := n.Notify(context.Background(), "alice@example.org", subject, body); err != nil {
				t.Errorf("Notify after Close: %v", err)
			}
			// Without a server the Notify after Close is logged too.
			if got, want := counterValue(t, n.mails.WithLabelValues(tc.result)), map[bool]float64{true: 2, false: 1}[tc.result == "unsent"]; got != want {
				t.Errorf("berth_mail_total{result=%q} = %v, want %v", tc.result, got, want)
			}
			// The Notify after Close.
			if got := counterValue(t, n.mails.WithLabelValues("dropped")); tc.result != "unsent" && got != 1 {
				t.Errorf("berth_mail_total{result=\"dropped\"} = %v, want 1", got)
			}
			for _, w := range tc.wantLogs {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, logs.String())
				}
			}
			got := srv.Messages()[before:]
			if !tc.arrives {
				if len(got) != 0 {
					t.Fatalf("%d messages arrived", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d messages arrived, want 1", len(got))
			}
			m := got[0]
			if len(m.To) != 1 || m.To[0] != "alice@example.org" || !m.TLS {
				t.Errorf("to %v, TLS %v", m.To, m.TLS)
			}
			pm, err := m.Parsed()
			if err != nil {
				t.Fatal(err)
			}
			var dec mime.WordDecoder
			if s, err := dec.DecodeHeader(pm.Header.Get("Subject")); err != nil || s != subject {
				t.Errorf("subject %q (%v)", s, err)
			}
			text, err := io.ReadAll(quotedprintable.NewReader(pm.Body))
			if err != nil || strings.ReplaceAll(string(text), "\r\n", "\n") != body {
				t.Errorf("body %q (%v)", text, err)
			}
		})
	}
}

// TestMailAtStart runs the binary: it says at start whether e-mail goes
// out, exposes berth_mail_total, and refuses an smtp section it could
// never send with.
func TestMailAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := berthtest.BuildBerth(t)
	data := filepath.Join(t.TempDir(), "data")

	p := startDaemon(t, bin, data)
	if !strings.Contains(p.stderr(), `"msg":"no SMTP server configured: e-mail notifications are not sent"`) {
		t.Errorf("no start line saying e-mail is off:\n%s", p.stderr())
	}
	resp, err := http.Get("http://" + p.addrs["metrics"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `berth_mail_total{result="unsent"} 0`) {
		t.Errorf("/metrics lacks berth_mail_total")
	}
	p.stop(t)

	srv := mailtest.Start(t, mailtest.Options{TLS: mailtest.Implicit, Username: "berth", Password: "pw"})
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p = startDaemon(t, bin, data, "--smtp-host", srv.Host, "--smtp-port", strconv.Itoa(srv.Port), "--smtp-security", "tls",
		"--smtp-username", "berth", "--smtp-password-file", pwFile, "--smtp-ca-file", srv.CAFile, "--smtp-from", "berth@example.org")
	if want := `"msg":"e-mail goes through SMTP server","component":"mail","server":"` + srv.Addr() + `","security":"tls","auth":true`; !strings.Contains(p.stderr(), want) {
		t.Errorf("no start line %s:\n%s", want, p.stderr())
	}
	p.stop(t)

	out, err := exec.Command(bin, "serve", "--data", data, "--smtp-host", "smtp.example.org").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `smtp.from: "" must be set when smtp.host is set`) {
		t.Errorf("serve with smtp.host and no smtp.from: %v\n%s", err, out)
	}
}
