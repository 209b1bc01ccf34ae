package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth/config"
)

// TestTLSKeyErrorNamesTheKey: a damaged key (the generated one, or a
// configured one that does not match its certificate) fails the start
// with a message naming the key file, not only the certificate.
func TestTLSKeyErrorNamesTheKey(t *testing.T) {
	data := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	if _, _, err := tlsConfig(config.TLS{}, data, log); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(data, "tls", "key.pem")
	if err := os.WriteFile(key, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := tlsConfig(config.TLS{}, data, log)
	if err == nil || !strings.Contains(err.Error(), key) {
		t.Errorf("a corrupt generated key: %v, want an error naming %s", err, key)
	}

	// A configured pair whose key belongs to another certificate.
	other := t.TempDir()
	if _, _, err := tlsConfig(config.TLS{}, other, log); err != nil {
		t.Fatal(err)
	}
	cert, otherKey := filepath.Join(data, "tls", "cert.pem"), filepath.Join(other, "tls", "key.pem")
	_, _, err = tlsConfig(config.TLS{Cert: cert, Key: otherKey}, data, log)
	if err == nil || !strings.Contains(err.Error(), otherKey) {
		t.Errorf("a key of another certificate: %v, want an error naming %s", err, otherKey)
	}
}
