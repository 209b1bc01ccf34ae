// Package directorytest runs a real OpenLDAP slapd for the tests of
// directory servers (account's auth sources): configured in a test's
// temporary directory, listening on loopback over LDAP and LDAPS with a
// certificate of a test CA, stopped when the test ends. Only test files
// import it.
package directorytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// Fixed names of the directory every Server holds.
const (
	Domain        = "example.com"
	BaseDN        = "dc=example,dc=com"
	PeopleDN      = "ou=people,dc=example,dc=com"
	AdminDN       = "cn=admin,dc=example,dc=com"
	AdminPassword = "directory-admin-secret"
	// Host is where the server listens, and the one name its
	// certificate carries (as an IP address): "localhost" does not
	// verify, which tests of host name checks use.
	Host = "127.0.0.1"
)

// Server is a running slapd.
type Server struct {
	// Port serves LDAP, TLSPort LDAPS.
	Port, TLSPort int
	// RootCAs trust the server's certificate, CAPEM is the same CA in PEM.
	RootCAs *x509.CertPool
	CAPEM   []byte
	t       testing.TB
}

// Slapd is where Debian's package puts the server.
const Slapd = "/usr/sbin/slapd"

// Start runs a slapd holding BaseDN and PeopleDN, and stops it when t
// ends. Without slapd the test is skipped, or fails when BERTH_INTEROP
// is "required" (CI, which installs it).
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(Slapd); err != nil {
		if os.Getenv("BERTH_INTEROP") == "required" {
			t.Fatalf("slapd is required (BERTH_INTEROP=required) but missing: %v; apt-get install slapd ldap-utils", err)
		}
		t.Skipf("no OpenLDAP server (%v); apt-get install slapd to run this test", err)
	}
	dir := t.TempDir()
	s := &Server{t: t}
	certFile, keyFile, caFile := s.writeCerts(dir)
	db := filepath.Join(dir, "db")
	if err := os.Mkdir(db, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "slapd.conf")
	cfg := fmt.Sprintf(`include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile %[1]s/slapd.pid
TLSCACertificateFile %[2]s
TLSCertificateFile %[3]s
TLSCertificateKeyFile %[4]s
database mdb
suffix "%[5]s"
rootdn "%[6]s"
rootpw %[7]s
directory %[8]s
maxsize 16777216
access to attrs=userPassword by anonymous auth by self write by * none
access to * by * read
`, dir, caFile, certFile, keyFile, BaseDN, AdminDN, AdminPassword, db)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "base.ldif")
	if err := os.WriteFile(base, []byte(fmt.Sprintf(`dn: %s
objectClass: dcObject
objectClass: organization
o: Example
dc: example

dn: %s
objectClass: organizationalUnit
ou: people
`, BaseDN, PeopleDN)), 0o600); err != nil {
		t.Fatal(err)
	}
	// slapadd is slapd under another name (it looks at argv[0]).
	add := exec.Command(Slapd, "-T", "add", "-f", conf, "-l", base)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("slapadd: %v\n%s", err, out)
	}
	s.Port, s.TLSPort = freePort(t), freePort(t)
	urls := fmt.Sprintf("ldap://%s:%d/ ldaps://%s:%d/", Host, s.Port, Host, s.TLSPort)
	cmd := exec.Command(Slapd, "-h", urls, "-f", conf, "-d", "0")
	logFile, err := os.Create(filepath.Join(dir, "slapd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting slapd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		logFile.Close()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(Host, strconv.Itoa(s.TLSPort)), time.Second)
		if err == nil {
			conn.Close()
			if c, err := net.DialTimeout("tcp", net.JoinHostPort(Host, strconv.Itoa(s.Port)), time.Second); err == nil {
				c.Close()
				break
			}
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "slapd.log"))
			t.Fatalf("slapd exited: %v\n%s", err, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("slapd did not start listening within 15 seconds")
		}
	}
	return s
}

// freePort is a loopback port nobody listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", Host+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeCerts makes a test CA and a server certificate for Host signed by
// it, writes them as PEM into dir and returns their files.
func (s *Server) writeCerts(dir string) (cert, key, ca string) {
	t := s.t
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth test directory CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: Host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP(Host)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	s.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	s.RootCAs = x509.NewCertPool()
	s.RootCAs.AddCert(caCert)
	files := map[string][]byte{
		"ca.pem":     s.CAPEM,
		"server.pem": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		"server.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.pem")
}

// User is a person's entry under PeopleDN.
type User struct {
	UID, GivenName, SN, Mail, Password string
}

// DN is u's entry.
func (u User) DN() string { return UserDN(u.UID) }

// UserDN is the entry of uid under PeopleDN.
func UserDN(uid string) string { return "uid=" + ldap.EscapeDN(uid) + "," + PeopleDN }

// admin is a connection bound as AdminDN over plain LDAP.
func (s *Server) admin() *ldap.Conn {
	s.t.Helper()
	c, err := ldap.DialURL(fmt.Sprintf("ldap://%s:%d", Host, s.Port))
	if err != nil {
		s.t.Fatal(err)
	}
	if err := c.Bind(AdminDN, AdminPassword); err != nil {
		c.Close()
		s.t.Fatal(err)
	}
	return c
}

// Add creates u's entry.
func (s *Server) Add(u User) {
	s.t.Helper()
	c := s.admin()
	defer c.Close()
	req := ldap.NewAddRequest(u.DN(), nil)
	req.Attribute("objectClass", []string{"inetOrgPerson"})
	req.Attribute("uid", []string{u.UID})
	req.Attribute("cn", []string{strings.TrimSpace(u.GivenName + " " + u.SN)})
	req.Attribute("sn", []string{u.SN})
	if u.GivenName != "" {
		req.Attribute("givenName", []string{u.GivenName})
	}
	if u.Mail != "" {
		req.Attribute("mail", []string{u.Mail})
	}
	if u.Password != "" {
		req.Attribute("userPassword", []string{u.Password})
	}
	if err := c.Add(req); err != nil {
		s.t.Fatalf("adding %s: %v", u.DN(), err)
	}
}

// Replace sets attributes of uid's entry (attribute name: value).
func (s *Server) Replace(uid string, attrs map[string]string) {
	s.t.Helper()
	c := s.admin()
	defer c.Close()
	req := ldap.NewModifyRequest(UserDN(uid), nil)
	for a, v := range attrs {
		req.Replace(a, []string{v})
	}
	if err := c.Modify(req); err != nil {
		s.t.Fatalf("modifying %s: %v", UserDN(uid), err)
	}
}

// Delete removes uid's entry.
func (s *Server) Delete(uid string) {
	s.t.Helper()
	c := s.admin()
	defer c.Close()
	if err := c.Del(ldap.NewDelRequest(UserDN(uid), nil)); err != nil {
		s.t.Fatalf("deleting %s: %v", UserDN(uid), err)
	}
}

// TLSConfig trusts the server, for a client of its LDAPS port.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: s.RootCAs, ServerName: Host}
}
