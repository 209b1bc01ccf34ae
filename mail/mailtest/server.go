// Package mailtest is a real SMTP server for tests, built on
// github.com/emersion/go-smtp: it listens on 127.0.0.1, optionally with
// STARTTLS or implicit TLS (a self-signed certificate made here) and AUTH
// PLAIN, and records every message it takes so a test can read what
// arrived. Only test files import it.
package mailtest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// TLSMode is how the server secures connections.
type TLSMode int

const (
	// Plain offers neither STARTTLS nor TLS.
	Plain TLSMode = iota
	// StartTLS offers STARTTLS on a plain listener.
	StartTLS
	// Implicit speaks TLS from the first byte.
	Implicit
)

// Options configure a Server.
type Options struct {
	// TLS picks plain, STARTTLS or implicit TLS.
	TLS TLSMode
	// Username and Password, when Username is set, make AUTH PLAIN
	// required before MAIL.
	Username, Password string
}

// Message is one message the server took.
type Message struct {
	// From is the MAIL FROM address, To the RCPT TO addresses.
	From string
	To   []string
	// Data is the message as received (headers and body, CRLF lines).
	Data []byte
	// TLS says whether the connection was encrypted when it arrived.
	TLS bool
}

// Parsed reads m as an RFC 5322 message.
func (m Message) Parsed() (*mail.Message, error) {
	return mail.ReadMessage(bytes.NewReader(m.Data))
}

// Server is a running test SMTP server.
type Server struct {
	// Host and Port are where it listens.
	Host string
	Port int
	// CAFile is a PEM file of its self-signed certificate (empty for
	// Plain), for the client's CA setting.
	CAFile string

	opts     Options
	mu       sync.Mutex
	messages []Message
	arrived  chan struct{}
}

// Start starts a server on 127.0.0.1:0; the test's cleanup stops it.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{opts: opts, arrived: make(chan struct{}, 100)}
	srv := smtp.NewServer(s)
	srv.Domain = "localhost"
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	srv.MaxMessageBytes = 1 << 20
	// Its error log would outlive the test in connection goroutines.
	srv.ErrorLog = log.New(io.Discard, "", 0)
	// Tests try AUTH on a plain connection too, to see the client refuse
	// or use it on loopback.
	srv.AllowInsecureAuth = true
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.TLS != Plain {
		cfg, caFile := selfSigned(t)
		s.CAFile = caFile
		if opts.TLS == StartTLS {
			srv.TLSConfig = cfg
		} else {
			l = tls.NewListener(l, cfg)
		}
	}
	addr := l.Addr().(*net.TCPAddr)
	s.Host, s.Port = "127.0.0.1", addr.Port
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		// Close misses a listener Serve has not registered yet (a test
		// that never connects ends first); closing it here ends Serve.
		_ = l.Close()
		<-done
	})
	return s
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Messages returns the messages taken so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Wait returns the first n messages once they have arrived, or an error
// when ctx ends first.
func (s *Server) Wait(ctx context.Context, n int) ([]Message, error) {
	for {
		if m := s.Messages(); len(m) >= n {
			return m[:n], nil
		}
		select {
		case <-s.arrived:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// NewSession is go-smtp's Backend.
func (s *Server) NewSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	return &session{srv: s, tls: isTLS, conn: c}, nil
}

// errAuthRequired is go-smtp's 530 for MAIL before AUTH.
var errAuthRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}

type session struct {
	srv    *Server
	conn   *smtp.Conn
	tls    bool
	authed bool
	from   string
	to     []string
}

func (s *session) AuthMechanisms() []string {
	if s.srv.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != s.srv.opts.Username || password != s.srv.opts.Password {
			return smtp.ErrAuthFailed
		}
		s.authed = true
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.srv.opts.Username != "" && !s.authed {
		return errAuthRequired
	}
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, isTLS := s.conn.TLSConnectionState()
	s.srv.mu.Lock()
	s.srv.messages = append(s.srv.messages, Message{From: s.from, To: s.to, Data: b, TLS: isTLS || s.tls})
	s.srv.mu.Unlock()
	select {
	case s.srv.arrived <- struct{}{}:
	default:
	}
	return nil
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

// selfSigned makes a certificate for 127.0.0.1 and localhost and writes
// it to a PEM file the client can trust.
func selfSigned(t testing.TB) (*tls.Config, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mailtest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "smtp-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, path
}
