package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"berth/atomicfile"
	"berth/config"
)

// selfSignedValidity is how long a generated certificate lasts. It is
// replaced by deleting data/tls; operators with real names configure
// tls.cert and tls.key instead.
const selfSignedValidity = 5 * 365 * 24 * time.Hour

// tlsConfig returns the HTTPS configuration: the configured certificate,
// or the self-signed one in dataDir/tls, generated on first start. The
// certificate comes from the returned certSource, so reloading that
// (SIGHUP) changes what new connections get without a restart.
func tlsConfig(c config.TLS, dataDir string, log *slog.Logger) (*tls.Config, *certSource, error) {
	certFile, keyFile := c.Cert, c.Key
	if certFile == "" {
		dir := filepath.Join(dataDir, "tls")
		certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		created, err := ensureSelfSigned(dir, certFile, keyFile)
		if err != nil {
			return nil, nil, err
		}
		if created {
			log.Info("generated a self-signed TLS certificate", "cert", certFile)
		}
	}
	src := &certSource{certFile: certFile, keyFile: keyFile}
	if err := src.load(); err != nil {
		return nil, nil, err
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: src.get,
		// Full 16 KiB records from a connection's first byte: Go's TLS
		// otherwise sends records of one TCP segment until 128 KiB have
		// gone out, which costs a file server a record (and a write
		// system call) per 1.4 KB at the start of every connection, to
		// speed up the first paint of a web page it rarely serves.
		DynamicRecordSizingDisabled: true,
	}, src, nil
}

// certSource holds the serving certificate and reloads it from its files:
// certificates are renewed (every 60 to 90 days with ACME), and renewing
// one must not mean dropping every connection and upload in progress.
type certSource struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// load reads the pair from the files. On error the certificate in use
// stays, so a renewal that left a half-written or mismatched pair does
// not take HTTPS down.
func (s *certSource) load() error {
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		// The error says "key" or "certificate" but names neither file.
		return fmt.Errorf("loading TLS certificate %s and key %s: %w", s.certFile, s.keyFile, err)
	}
	s.cur.Store(&cert)
	return nil
}

func (s *certSource) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.cur.Load(), nil
}

// notAfter is when the certificate in use expires, for the reload log.
func (s *certSource) notAfter() time.Time {
	if c := s.cur.Load(); c != nil && c.Leaf != nil {
		return c.Leaf.NotAfter
	}
	return time.Time{}
}

// ensureSelfSigned creates an ECDSA P-256 certificate for the loopback
// names and this host's name unless one is already there.
func ensureSelfSigned(dir, certFile, keyFile string) (created bool, err error) {
	_, certErr := os.Stat(certFile)
	_, keyErr := os.Stat(keyFile)
	if certErr == nil && keyErr == nil {
		return false, nil
	}
	if !errors.Is(certErr, fs.ErrNotExist) && certErr != nil {
		return false, certErr
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return false, err
	}
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		names = append(names, h)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: names[len(names)-1], Organization: []string{"berth self-signed"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		// It is its own CA, so clients can pin it as a root.
		IsCA:        true,
		DNSNames:    names,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return false, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return false, err
	}
	// The key first: a certificate without its key would be reused and fail.
	if err := atomicfile.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return false, err
	}
	if err := atomicfile.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return false, err
	}
	return true, nil
}

// caPool reads the PEM certificates of file into a pool, for a setting
// that names a certificate authority to trust instead of the system's.
func caPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// hsts is the Strict-Transport-Security of every HTTPS answer: a year,
// as the share-link pages have sent it (web's own), which browsers keep
// for the host once they have seen it over a certificate they trust.
const hsts = "max-age=31536000"

// withHSTS adds hsts to every answer of the HTTPS listener, the API's
// and WebDAV's too, where only the pages sent it: a browser that opened
// an API or WebDAV address first learnt nothing, and a later plain
// http:// link to the host went out in clear before the 400 came back.
// Never on the plain-HTTP listener, where RFC 6797 7.2 forbids it.
func withHSTS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", hsts)
		h.ServeHTTP(w, r)
	})
}
