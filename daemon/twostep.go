package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"berth/account"
	"berth/config"
	"berth/mail"
)

// smsTimeout bounds one run of two_step.sms_command: a sign-in waits for
// it, so a hung provider must not hold the request for long.
const smsTimeout = 30 * time.Second

// maxSMSOutput is how much of the command's output a failure logs.
const maxSMSOutput = 1 << 10

// codeSender delivers two-step codes (account.CodeSender): e-mail
// through the SMTP server, text messages through two_step.sms_command.
// Unlike notices, a code is sent before the request answers, so that a
// failure is told to the person (account.ErrCodeNotSent) instead of
// leaving them waiting for a code that never comes.
type codeSender struct {
	// mail is the daemon's mailer, set once it exists (it is built
	// after the account service); nil or without a server: no e-mail.
	mail       *mailNotifier
	smsCommand string
	log        *slog.Logger
}

// newCodeSender checks two_step.sms_command (an executable file) and
// returns the sender with the account options it serves.
func newCodeSender(cfg config.Config, log *slog.Logger) (*codeSender, account.TwoStepOptions, error) {
	c := &codeSender{smsCommand: cfg.TwoStep.SMSCommand, log: log}
	if c.smsCommand != "" {
		fi, err := os.Stat(c.smsCommand)
		if err != nil {
			return nil, account.TwoStepOptions{}, fmt.Errorf("config: two_step.sms_command: %w", err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return nil, account.TwoStepOptions{}, fmt.Errorf("config: two_step.sms_command: %s is not an executable file", c.smsCommand)
		}
		log.Info("two-step codes by text message go through a command", "command", c.smsCommand)
	}
	return c, account.TwoStepOptions{
		Sender:  c,
		Email:   cfg.SMTP.Host != "",
		SMS:     c.smsCommand != "",
		Issuer:  cfg.TwoStep.Issuer,
		CodeTTL: cfg.TwoStep.CodeTTL,
	}, nil
}

// codeText is the message of a code, the same by e-mail and SMS.
func codeText(m account.CodeMessage) string {
	what := "sign in to berth"
	if m.Purpose == account.CodeEnrollment {
		what = "turn on two-step verification"
	}
	return fmt.Sprintf("Your berth code is %s. Use it to %s before %s. If you did not ask for it, someone has your password: change it.",
		m.Code, what, m.Expires.UTC().Format("15:04 UTC"))
}

// SendCode delivers m by its mode.
func (c *codeSender) SendCode(ctx context.Context, m account.CodeMessage) error {
	switch m.Mode {
	case account.TwoStepEmail:
		return c.sendMail(ctx, m)
	case account.TwoStepSMS:
		return c.sendSMS(ctx, m)
	}
	return fmt.Errorf("two-step: no way to send a code of mode %q", m.Mode)
}

func (c *codeSender) sendMail(ctx context.Context, m account.CodeMessage) error {
	if c.mail == nil || c.mail.sender == nil {
		return errors.New("two-step: no SMTP server configured")
	}
	msg := mail.Message{To: m.To, Subject: "Your berth code: " + m.Code, Text: codeText(m) + "\n"}
	err := c.mail.sender.Send(ctx, msg)
	result := "sent"
	if err != nil {
		result = "failed"
	}
	c.mail.mails.WithLabelValues(result).Inc()
	return err
}

// sendSMS runs two_step.sms_command with the number and the code in its
// environment (never its arguments, which ps shows to every user) and
// the text on its standard input.
func (c *codeSender) sendSMS(ctx context.Context, m account.CodeMessage) error {
	if c.smsCommand == "" {
		return errors.New("two-step: no two_step.sms_command configured")
	}
	ctx, cancel := context.WithTimeout(ctx, smsTimeout)
	defer cancel()
	text := codeText(m)
	cmd := exec.CommandContext(ctx, c.smsCommand)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"BERTH_SMS_TO=" + m.To,
		"BERTH_SMS_CODE=" + m.Code,
		"BERTH_SMS_TEXT=" + text,
		"BERTH_SMS_PURPOSE=" + m.Purpose,
	}
	cmd.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limitedBuffer{&out, maxSMSOutput}, &limitedBuffer{&out, maxSMSOutput}
	cmd.WaitDelay = time.Second
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("two_step.sms_command: %w: %s", err, strings.TrimSpace(out.String()))
	}
	c.log.Info("two-step code sent by text message", "person_id", m.PersonID, "purpose", m.Purpose, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// limitedBuffer keeps the first n bytes written to it and drops the rest,
// so a chatty command cannot grow the daemon's memory.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
