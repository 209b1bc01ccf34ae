package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/account"
	"berth/berthtest"
	"berth/config"
	"berth/mail/mailtest"
	"berth/rest"
)

// smsRecorder is a two_step.sms_command that appends what it got (its
// environment's BERTH_SMS_* and HOME, and its standard input) to a file.
const smsRecorder = `#!/bin/sh
{
	echo "to=$BERTH_SMS_TO"
	echo "code=$BERTH_SMS_CODE"
	echo "purpose=$BERTH_SMS_PURPOSE"
	echo "home=${HOME-unset}"
	echo "stdin=$(cat)"
} >> "$(dirname "$0")/sms.log"
`

// TestTwoStepCodesDelivered: e-mail codes through a real SMTP server and
// SMS codes through a real command, wired as serve wires them, over the
// password grant (spec 5.4: missing_totp once the code is sent).
func TestTwoStepCodesDelivered(t *testing.T) {
	smtpd := mailtest.Start(t, mailtest.Options{})
	dir := t.TempDir()
	script := filepath.Join(dir, "send-sms")
	if err := os.WriteFile(script, []byte(smsRecorder), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := &berthtest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	cfg := config.Default()
	cfg.SMTP.Host, cfg.SMTP.Port, cfg.SMTP.Security, cfg.SMTP.From, cfg.SMTP.Timeout = smtpd.Host, smtpd.Port, "none", "berth@files.example.org", 5*time.Second
	cfg.TwoStep.SMSCommand = script
	codes, tso, err := newCodeSender(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	mailer, err := newMailNotifier(cfg.SMTP, log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mailer.Close(context.Background()) })
	codes.mail = mailer
	st := berthtest.New(t, berthtest.Options{Logger: log, Accounts: account.Options{TwoStep: tso}})
	srv := httptest.NewTLSServer(rest.New(rest.Options{Logger: log, FS: st.FS, Accounts: st.Accounts}))
	t.Cleanup(srv.Close)

	post := func(path, token string, f url.Values) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(f.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %s", path, b)
		}
		return resp.StatusCode, v
	}
	grant := func(user, code string) (int, map[string]any) {
		f := url.Values{"grant_type": {"password"}, "client_id": {"anchor"}, "username": {user}, "password": {"correct horse battery"}}
		if code != "" {
			f.Set("auth_code", code)
		}
		return post("/oauth/token", "", f)
	}
	codeRE := regexp.MustCompile(`Your berth code is ([0-9]{6})\.`)
	nextMail := func(n int, to string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ms, err := smtpd.Wait(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		m := readMail(t, ms[n-1])
		c := codeRE.FindStringSubmatch(m.body)
		if m.to != to || c == nil || !strings.HasSuffix(m.subject, c[1]) {
			t.Fatalf("mail %d: %+v", n, m)
		}
		return c[1]
	}
	lastSMS := func(n int) map[string]string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "sms.log"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 5*n {
			t.Fatalf("%d lines of SMS, want %d:\n%s", len(lines), 5*n, b)
		}
		got := map[string]string{}
		for _, l := range lines[5*(n-1):] {
			k, v, _ := strings.Cut(l, "=")
			got[k] = v
		}
		return got
	}

	for _, c := range []struct {
		mode, phone string
		code        func(n int, p account.Person, purpose string) string
	}{
		{account.TwoStepEmail, "", func(n int, p account.Person, _ string) string { return nextMail(n, p.Email) }},
		{account.TwoStepSMS, "+44 20 7946 0000", func(n int, _ account.Person, purpose string) string {
			got := lastSMS(n)
			if got["to"] != "+442079460000" || got["purpose"] != purpose || got["home"] != "unset" ||
				!strings.Contains(got["stdin"], "Your berth code is "+got["code"]) {
				t.Fatalf("SMS %d: %v", n, got)
			}
			return got["code"]
		}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			p, _, token := st.AddPerson(t, "p-"+c.mode, "correct horse battery")
			path := "/api/2/person/" + strconv.FormatUint(p.ID, 10) + "/two_step/"
			if status, v := post(path+"enroll", token, url.Values{"mode": {c.mode}, "phone": {c.phone}, "current_password": {"correct horse battery"}}); status != 200 {
				t.Fatalf("enroll: %d %v", status, v)
			}
			if status, v := post(path+"confirm", token, url.Values{"auth_code": {c.code(1, p, account.CodeEnrollment)}}); status != 200 {
				t.Fatalf("confirm: %d %v", status, v)
			}
			status, v := grant(p.Username, "")
			if status != 401 || v["error"] != "missing_totp" || v["two_step_mode"] != c.mode {
				t.Fatalf("without a code: %d %v", status, v)
			}
			code := c.code(2, p, account.CodeSignIn)
			if status, v := grant(p.Username, code); status != 200 {
				t.Fatalf("with the code: %d %v", status, v)
			}
			if status, v := grant(p.Username, code); status != 401 || v["error"] != "invalid_totp" {
				t.Fatalf("the code again: %d %v", status, v)
			}
		})
	}
	if strings.Contains(logs.String(), "Your berth code") {
		t.Errorf("a code was logged:\n%s", logs)
	}
}

// TestSMSCommandRefusals: a command that fails is an error with what it
// said; one that is not executable stops the start, naming the key.
func TestSMSCommandRefusals(t *testing.T) {
	dir := t.TempDir()
	failing := filepath.Join(dir, "fail")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'provider says no' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.TwoStep.SMSCommand = failing
	log := slog.New(slog.DiscardHandler)
	c, tso, err := newCodeSender(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if !tso.SMS || tso.Email {
		t.Errorf("options %+v", tso)
	}
	err = c.SendCode(context.Background(), account.CodeMessage{Mode: account.TwoStepSMS, To: "+15550100000", Code: "123456"})
	if err == nil || !strings.Contains(err.Error(), "provider says no") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("failing command: %v", err)
	}
	if err := c.SendCode(context.Background(), account.CodeMessage{Mode: account.TwoStepEmail, To: "a@example.org", Code: "123456"}); err == nil {
		t.Error("e-mail without an SMTP server was sent")
	}
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644)
	for _, path := range []string{plain, filepath.Join(dir, "missing")} {
		cfg.TwoStep.SMSCommand = path
		if _, _, err := newCodeSender(cfg, log); err == nil || !strings.Contains(err.Error(), "two_step.sms_command") {
			t.Errorf("%s: %v", path, err)
		}
	}
}
