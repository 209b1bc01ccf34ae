package daemon

import (
	"crypto/tls"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// servedSerial is the serial number of the certificate a new TLS
// connection to addr gets.
func servedSerial(t *testing.T, addr string) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestHangupReloadsCertificate: SIGHUP makes the running daemon serve a
// renewed certificate to new connections, a broken renewal keeps the one
// in use (and says so), and the daemon neither exits nor restarts.
func TestHangupReloadsCertificate(t *testing.T) {
	bin := buildBinary(t)
	data := t.TempDir()
	p := startDaemon(t, bin, data)
	addr := p.addrs["https"]
	first := servedSerial(t, addr)

	// A renewal: a new pair written over the files in use.
	renewed := t.TempDir()
	if _, err := ensureSelfSigned(renewed, filepath.Join(renewed, "cert.pem"), filepath.Join(renewed, "key.pem")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cert.pem", "key.pem"} {
		b, err := os.ReadFile(filepath.Join(renewed, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := writeFileAtomic(filepath.Join(data, "tls", f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := servedSerial(t, addr); got.Cmp(first) != 0 {
		t.Fatalf("the certificate changed before SIGHUP")
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	second := waitFor(t, 10*time.Second, func() (*big.Int, bool) {
		s := servedSerial(t, addr)
		return s, s.Cmp(first) != 0
	})

	// A broken renewal: the key no longer matches.
	if err := os.WriteFile(filepath.Join(data, "tls", "cert.pem"), []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() (struct{}, bool) {
		return struct{}{}, strings.Contains(p.stderr(), "keeping the TLS certificate in use")
	})
	if got := servedSerial(t, addr); got.Cmp(second) != 0 {
		t.Errorf("after a broken renewal the served certificate is %v, want the one in use (%v)", got, second)
	}
	p.stop(t)
}

// waitFor polls cond until it holds or d passes.
func waitFor[T any](t *testing.T, d time.Duration, cond func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v, ok := cond()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
