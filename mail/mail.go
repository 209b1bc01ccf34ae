// Package mail sends berth's e-mail (share invitations, download and
// upload notifications) through one configured SMTP server: no STARTTLS,
// STARTTLS or implicit TLS, with optional AUTH PLAIN.
//
// It imports nothing of berth's: the daemon builds a Sender from the
// configuration and hands the domain packages a notifier built on it.
// The client is the standard library's net/smtp, frozen but complete for
// a submission client; a Sender adds what it lacks: deadlines bound by
// the context and a timeout, a well-formed RFC 5322 message, and refusal
// of header injection.
package mail

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Security is how a Sender protects its connection.
type Security string

const (
	// None speaks plain SMTP; AUTH is then refused by the client unless
	// the server is on loopback, so a password never crosses a network
	// in the clear.
	None Security = "none"
	// StartTLS connects in plain text and upgrades with STARTTLS
	// (submission, port 587); a server that does not offer it is an error.
	StartTLS Security = "starttls"
	// TLS connects with TLS from the first byte (submissions, port 465).
	TLS Security = "tls"
)

// Errors a Sender returns. Each is wrapped with the detail that names
// the cause (the server's reply, the address).
var (
	// ErrBadAddress is a recipient or sender that is not one e-mail
	// address, or holds a line break.
	ErrBadAddress = errors.New("mail: not an e-mail address")
	// ErrBadSubject is a subject with a line break or too long.
	ErrBadSubject = errors.New("mail: subject not allowed")
	// ErrAuth is credentials the SMTP server refused, or AUTH the server
	// or the connection cannot do.
	ErrAuth = errors.New("mail: SMTP authentication failed")
	// ErrTLS is a STARTTLS the server does not offer or a TLS handshake
	// that failed.
	ErrTLS = errors.New("mail: SMTP TLS failed")
	// ErrUnreachable is a server that could not be reached in time.
	ErrUnreachable = errors.New("mail: SMTP server unreachable")
	// ErrRefused is a server that refused the message (sender,
	// recipient or content) or broke the exchange.
	ErrRefused = errors.New("mail: SMTP server refused the message")
)

// maxSubject bounds a subject in bytes, well under RFC 5322's 998
// characters a line once encoded.
const maxSubject = 400

// Options configure a Sender.
type Options struct {
	// Host and Port are the SMTP server's address.
	Host string
	Port int
	// Security is None, StartTLS or TLS.
	Security Security
	// Username turns AUTH PLAIN on; empty sends without authentication.
	Username string
	// Password is the AUTH password; PasswordFile, if set, is read at New
	// instead (its trailing line break dropped) so the secret stays out
	// of the configuration file and the environment.
	Password     string
	PasswordFile string
	// From is the sender's address (RFC 5322 From and SMTP MAIL FROM);
	// it may carry a display name: "Berth <berth@example.org>".
	From string
	// Timeout bounds one whole Send (connect, TLS, exchange); the
	// context's deadline, if sooner, wins. Zero means 30 seconds.
	Timeout time.Duration
	// CAFile is a PEM file of the certificate authorities that sign the
	// server's certificate; empty uses the system's.
	CAFile string
	// InsecureSkipVerify accepts any certificate; for tests only.
	InsecureSkipVerify bool
	// HelloName is the name given in EHLO; empty uses the host name.
	HelloName string
}

// Message is one e-mail: a plain text body to one recipient.
type Message struct {
	// To is the recipient, optionally with a display name.
	To string
	// Subject is one line of text, non-ASCII allowed.
	Subject string
	// Text is the body, UTF-8; line breaks may be \n or \r\n.
	Text string
}

// Check reports what Send would refuse in m before connecting: a
// recipient that is not one address (ErrBadAddress), a subject with a
// line break, too long or not UTF-8 (ErrBadSubject). A caller that sends
// later checks now, while it can still tell its own caller.
func (m Message) Check() error {
	if _, err := parseAddress(m.To); err != nil {
		return err
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return fmt.Errorf("%w: a line break in the subject", ErrBadSubject)
	}
	if len(m.Subject) > maxSubject || !utf8.ValidString(m.Subject) {
		return fmt.Errorf("%w: longer than %d bytes or not UTF-8", ErrBadSubject, maxSubject)
	}
	return nil
}

// Sender sends messages through one SMTP server. It is safe for
// concurrent use: each Send opens its own connection.
type Sender struct {
	addr     string
	host     string
	security Security
	username string
	password string
	from     *mail.Address
	timeout  time.Duration
	tls      *tls.Config
	hello    string
}

// New checks opts and returns a Sender. It reads PasswordFile and CAFile
// now, so a bad file stops the daemon at start, not at the first mail.
func New(opts Options) (*Sender, error) {
	if opts.Host == "" {
		return nil, errors.New("mail: no SMTP host")
	}
	if opts.Port < 1 || opts.Port > 65535 {
		return nil, fmt.Errorf("mail: SMTP port %d out of range", opts.Port)
	}
	switch opts.Security {
	case None, StartTLS, TLS:
	default:
		return nil, fmt.Errorf("mail: security %q is not none, starttls or tls", opts.Security)
	}
	from, err := parseAddress(opts.From)
	if err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	s := &Sender{
		addr:     net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)),
		host:     opts.Host,
		security: opts.Security,
		username: opts.Username,
		password: opts.Password,
		from:     from,
		timeout:  opts.Timeout,
		hello:    opts.HelloName,
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Second
	}
	if opts.PasswordFile != "" {
		b, err := os.ReadFile(opts.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("mail: password file: %w", err)
		}
		s.password = strings.TrimRight(string(b), "\r\n")
	}
	s.tls = &tls.Config{ServerName: opts.Host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: opts.InsecureSkipVerify}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("mail: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mail: CA file %s holds no PEM certificate", opts.CAFile)
		}
		s.tls.RootCAs = pool
	}
	if s.hello == "" {
		if h, err := os.Hostname(); err == nil && h != "" && !strings.ContainsAny(h, " \r\n") {
			s.hello = h
		} else {
			s.hello = "localhost"
		}
	}
	return s, nil
}

// Addr is the server's host:port, for logs.
func (s *Sender) Addr() string { return s.addr }

// Send delivers m to the server. It returns once the server has taken
// the message (250 after DATA) or with an error wrapping one of the
// package's errors.
func (s *Sender) Send(ctx context.Context, m Message) error {
	if err := m.Check(); err != nil {
		return err
	}
	to, _ := parseAddress(m.To)
	var msg bytes.Buffer
	if err := s.write(&msg, to, m, time.Now()); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	conn, err := s.dial(ctx)
	if err != nil {
		return err
	}
	// The deadline bounds every read and write; closing the connection
	// when the context ends unblocks one already waiting.
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()

	err = s.exchange(conn, to.Address, msg.Bytes())
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: %s: no answer within %s: %v", ErrUnreachable, s.addr, s.timeout, err)
	}
	return err
}

// dial connects, with TLS from the start when Security is TLS.
func (s *Sender) dial(ctx context.Context) (net.Conn, error) {
	d := &net.Dialer{}
	var conn net.Conn
	var err error
	if s.security == TLS {
		conn, err = (&tls.Dialer{NetDialer: d, Config: s.tls}).DialContext(ctx, "tcp", s.addr)
		var certErr *tls.CertificateVerificationError
		var recErr tls.RecordHeaderError
		if errors.As(err, &certErr) || errors.As(err, &recErr) {
			return nil, fmt.Errorf("%w: %s: %v", ErrTLS, s.addr, err)
		}
	} else {
		conn, err = d.DialContext(ctx, "tcp", s.addr)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, s.addr, err)
	}
	return conn, nil
}

// exchange speaks SMTP on conn: EHLO, STARTTLS, AUTH, MAIL, RCPT, DATA.
func (s *Sender) exchange(conn net.Conn, rcpt string, msg []byte) error {
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		return fmt.Errorf("%w: %s: greeting: %v", ErrUnreachable, s.addr, err)
	}
	defer c.Close()
	if err := c.Hello(s.hello); err != nil {
		return fmt.Errorf("%w: EHLO: %v", ErrRefused, err)
	}
	if s.security == StartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return fmt.Errorf("%w: %s does not offer STARTTLS", ErrTLS, s.addr)
		}
		if err := c.StartTLS(s.tls); err != nil {
			return fmt.Errorf("%w: %s: STARTTLS: %v", ErrTLS, s.addr, err)
		}
	}
	if s.username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return fmt.Errorf("%w: %s offers no AUTH on this connection (a username is configured)", ErrAuth, s.addr)
		}
		// net/smtp's PLAIN refuses to send the password over a plain
		// connection to anything but loopback.
		if err := c.Auth(smtp.PlainAuth("", s.username, s.password, s.host)); err != nil {
			return fmt.Errorf("%w: %s as %q: %v", ErrAuth, s.addr, s.username, err)
		}
	}
	if err := c.Mail(s.from.Address); err != nil {
		return fmt.Errorf("%w: MAIL FROM %s: %v", ErrRefused, s.from.Address, err)
	}
	if err := c.Rcpt(rcpt); err != nil {
		return fmt.Errorf("%w: RCPT TO %s: %v", ErrRefused, rcpt, err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("%w: DATA: %v", ErrRefused, err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("%w: DATA: %v", ErrRefused, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("%w: message: %v", ErrRefused, err)
	}
	// The message is taken; a failed QUIT loses nothing.
	_ = c.Quit()
	return nil
}

// parseAddress reads one address, refusing line breaks before the
// parser sees them: an address is copied into headers and commands.
func parseAddress(s string) (*mail.Address, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, fmt.Errorf("%w: a line break in %q", ErrBadAddress, s)
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadAddress, s, err)
	}
	if strings.ContainsAny(a.Address, "<>\r\n") || a.Address == "" {
		return nil, fmt.Errorf("%w: %q", ErrBadAddress, s)
	}
	return a, nil
}

// write builds the RFC 5322 message: headers (non-ASCII encoded per RFC
// 2047), then the body as quoted-printable UTF-8 text with CRLF lines.
func (s *Sender) write(w io.Writer, to *mail.Address, m Message, now time.Time) error {
	var id [16]byte
	_, _ = rand.Read(id[:])
	domain := s.from.Address[strings.LastIndexByte(s.from.Address, '@')+1:]
	var b strings.Builder
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", s.from.String())
	header("To", to.String())
	header("Subject", encodeSubject(m.Subject))
	header("Date", now.Format(time.RFC1123Z))
	header("Message-ID", "<"+hex.EncodeToString(id[:])+"@"+domain+">")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	header("Auto-Submitted", "auto-generated")
	b.WriteString("\r\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	qp := quotedprintable.NewWriter(w)
	text := strings.ReplaceAll(m.Text, "\r\n", "\n")
	// quotedprintable writes a bare \n as CRLF (a text line break).
	if _, err := io.WriteString(qp, text); err != nil {
		return err
	}
	return qp.Close()
}

// encodeSubject encodes a non-ASCII subject as RFC 2047 encoded words,
// folding between words so no line runs past 78 characters for long
// subjects.
func encodeSubject(s string) string {
	enc := mime.QEncoding.Encode("utf-8", s)
	return strings.ReplaceAll(enc, "?= =?", "?=\r\n =?")
}
