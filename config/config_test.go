package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// load parses args as a command line would and loads the configuration.
func load(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return Load(fs)
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	c, err := load(t)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	if c != want {
		t.Fatalf("Load() = %+v, want defaults %+v", c, want)
	}
	if c.Data != "./berth-data" || c.Listen != "127.0.0.1:8443" || c.HTTPListen != "" ||
		c.MetricsListen != "127.0.0.1:9464" || c.ShutdownGrace != 30*time.Second ||
		c.Admin.Login != "admin" || c.Organization.Name != "Default" ||
		c.OAuth.AccessTokenTTL != time.Hour || c.OAuth.RefreshTokenTTL != 720*time.Hour ||
		c.Lockout.MaxFailures != 5 || c.Lockout.Duration != 15*time.Minute || c.Activity.Retention != 365*24*time.Hour ||
		c.GC.Interval != time.Hour || c.WebDAV.InfiniteDepth || c.Log.Format != "text" ||
		c.Storage.Reserve != 1<<30 || c.GC.PurgeDeletedAfter != 0 || c.HTTP.BodyIdleTimeout != time.Minute ||
		c.HTTP.MaxHeaderBytes != 64<<10 {
		t.Fatalf("unexpected defaults: %+v", c)
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, `
data: /from/file
listen: 127.0.0.1:1001
http_listen: 127.0.0.1:2001
metrics_listen: 127.0.0.1:3001
shutdown_grace: 10s
tls: {cert: "", key: ""}
log: {format: json}
lockout: {max_failures: 7}
webdav: {infinite_depth: true}
storage: {reserve: 2GiB}
http: {body_idle_timeout: 45s}
`)
	// The file alone.
	c, err := load(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Data != "/from/file" || c.Listen != "127.0.0.1:1001" || c.ShutdownGrace != 10*time.Second ||
		c.Log.Format != "json" || c.Lockout.MaxFailures != 7 || !c.WebDAV.InfiniteDepth ||
		c.Storage.Reserve != 2<<30 || c.HTTP.BodyIdleTimeout != 45*time.Second || c.HTTPListen != "127.0.0.1:2001" {
		t.Fatalf("file values not applied: %+v", c)
	}
	// Unset keys keep their defaults.
	if c.Admin.Login != "admin" || c.GC.Interval != time.Hour {
		t.Fatalf("defaults lost: %+v", c)
	}

	// The environment beats the file.
	t.Setenv("BERTH_DATA", "/from/env")
	t.Setenv("BERTH_LISTEN", "127.0.0.1:1002")
	t.Setenv("BERTH_HTTP_LISTEN", "127.0.0.1:2002")
	t.Setenv("BERTH_METRICS_LISTEN", "")
	t.Setenv("BERTH_SHUTDOWN_GRACE", "20s")
	t.Setenv("BERTH_LOCKOUT_MAX_FAILURES", "9")
	t.Setenv("BERTH_ADMIN_PASSWORD", "correct horse battery")
	t.Setenv("BERTH_STORAGE_RESERVE", "500 MB")
	t.Setenv("BERTH_HTTP_BODY_IDLE_TIMEOUT", "20s")
	c, err = load(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Data != "/from/env" || c.Listen != "127.0.0.1:1002" || c.HTTPListen != "127.0.0.1:2002" ||
		c.ShutdownGrace != 20*time.Second || c.Lockout.MaxFailures != 9 || c.MetricsListen != "" ||
		c.Admin.Password != "correct horse battery" || c.Log.Format != "json" ||
		c.Storage.Reserve != 500e6 || c.HTTP.BodyIdleTimeout != 20*time.Second {
		t.Fatalf("env values not applied: %+v", c)
	}

	// Flags beat the environment; flags left unset do not.
	c, err = load(t, "--config", file, "--data", "/from/flag", "--listen", "127.0.0.1:1003",
		"--shutdown-grace", "1m30s", "--lockout-max-failures", "3", "--webdav-infinite-depth=false",
		"--storage-reserve", "0", "--http-body-idle-timeout", "5s")
	if err != nil {
		t.Fatal(err)
	}
	if c.Data != "/from/flag" || c.Listen != "127.0.0.1:1003" || c.ShutdownGrace != 90*time.Second ||
		c.Lockout.MaxFailures != 3 || c.WebDAV.InfiniteDepth || c.HTTPListen != "127.0.0.1:2002" ||
		c.Storage.Reserve != 0 || c.HTTP.BodyIdleTimeout != 5*time.Second {
		t.Fatalf("flag values not applied: %+v", c)
	}
}

func TestEnvironmentAndFlagNames(t *testing.T) {
	for key, want := range map[string][2]string{
		"data":           {"data", "BERTH_DATA"},
		"http_listen":    {"http-listen", "BERTH_HTTP_LISTEN"},
		"metrics_listen": {"metrics-listen", "BERTH_METRICS_LISTEN"},
		"tls.cert":       {"tls-cert", "BERTH_TLS_CERT"},
		"admin.password": {"admin-password", "BERTH_ADMIN_PASSWORD"},
	} {
		if got := FlagName(key); got != want[0] {
			t.Errorf("FlagName(%q) = %q, want %q", key, got, want[0])
		}
		if got := EnvName(key); got != want[1] {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, want[1])
		}
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	RegisterFlags(fs)
	if fs.Lookup("admin-password") != nil {
		t.Error("the admin password must not be a flag (ps shows command lines)")
	}
	for _, name := range []string{"config", "data", "listen", "http-listen", "metrics-listen"} {
		if fs.Lookup(name) == nil {
			t.Errorf("missing flag --%s", name)
		}
	}
}

func TestValidationNamesKeyAndValue(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		file string
		want []string // substrings of the error
	}{
		{name: "listen", env: map[string]string{"BERTH_LISTEN": "abc"}, want: []string{`listen: "abc" is not host:port`}},
		{name: "http_listen", env: map[string]string{"BERTH_HTTP_LISTEN": "host:port"}, want: []string{`http_listen: "host:port"`}},
		{name: "metrics port", env: map[string]string{"BERTH_METRICS_LISTEN": "127.0.0.1:70000"}, want: []string{`metrics_listen: "127.0.0.1:70000"`}},
		{name: "public_url over http", env: map[string]string{"BERTH_PUBLIC_URL": "http://files.example.com"}, want: []string{`public_url: "http://files.example.com" is not an https URL`}},
		{name: "public_url with a path", env: map[string]string{"BERTH_PUBLIC_URL": "https://files.example.com/berth/"}, want: []string{`public_url: "https://files.example.com/berth/"`}},
		{name: "public_url without a host", env: map[string]string{"BERTH_PUBLIC_URL": "https://"}, want: []string{`public_url: "https://"`}},
		{name: "duration env", env: map[string]string{"BERTH_SHUTDOWN_GRACE": "soon"}, want: []string{`shutdown_grace: "soon" is not a duration`}},
		{name: "duration file", file: "gc:\n  interval: 5\n", want: []string{`gc.interval: 5 is not a duration`}},
		{name: "negative duration", file: "lockout:\n  duration: -1m\n", want: []string{`lockout.duration: "-1m0s" must be positive`}},
		{name: "negative retention", file: "activity:\n  retention: -1h\n", want: []string{`activity.retention: "-1h0m0s" must not be negative (0 keeps records forever)`}},
		{name: "zero body idle timeout", env: map[string]string{"BERTH_HTTP_BODY_IDLE_TIMEOUT": "0s"}, want: []string{`http.body_idle_timeout: "0s" must be positive`}},
		{name: "header bound below 4 KiB", env: map[string]string{"BERTH_HTTP_MAX_HEADER_BYTES": "1KiB"}, want: []string{`http.max_header_bytes: "1.0 KiB" must be between 4KiB and 1MiB`}},
		{name: "header bound over 1 MiB", env: map[string]string{"BERTH_HTTP_MAX_HEADER_BYTES": "2MiB"}, want: []string{`http.max_header_bytes: "2.0 MiB" must be between 4KiB and 1MiB`}},
		{name: "negative connections per address", env: map[string]string{"BERTH_HTTP_MAX_CONNS_PER_ADDRESS": "-1"}, want: []string{`http.max_conns_per_address: "-1" must not be negative`}},
		{name: "a directory network that is none", env: map[string]string{"BERTH_DIRECTORY_ALLOWED_NETWORKS": "10.0.0.0/8, ldap.example.com"}, want: []string{`directory.allowed_networks: "10.0.0.0/8, ldap.example.com" is not a comma-separated list of addresses and networks`}},
		{name: "integer", env: map[string]string{"BERTH_LOCKOUT_MAX_FAILURES": "many"}, want: []string{`lockout.max_failures: "many" is not an integer`}},
		// expires_in is whole seconds: 0 reads as "never expires" to
		// x/oauth2, whose clients would then send the dead token on.
		{name: "sub-second token", env: map[string]string{"BERTH_OAUTH_ACCESS_TOKEN_TTL": "500ms"}, want: []string{`oauth.access_token_ttl: "500ms" must be at least 1s`}},
		{name: "long refresh grace", env: map[string]string{"BERTH_OAUTH_REFRESH_REUSE_GRACE": "1h"}, want: []string{`oauth.refresh_reuse_grace: "1h0m0s" must be between 0 and 10m`}},
		{name: "short invitation lifetime", env: map[string]string{"BERTH_SHARES_INVITATION_TTL": "30m"}, want: []string{`shares.invitation_ttl: "30m0s" must be between 1h and 8760h`}},
		{name: "zero failures", env: map[string]string{"BERTH_LOCKOUT_MAX_FAILURES": "0"}, want: []string{`lockout.max_failures: "0" must be at least 1`}},
		{name: "boolean", env: map[string]string{"BERTH_WEBDAV_INFINITE_DEPTH": "perhaps"}, want: []string{`webdav.infinite_depth: "perhaps" is not a boolean`}},
		{name: "negative purge age", env: map[string]string{"BERTH_GC_PURGE_DELETED_AFTER": "-1h"}, want: []string{`gc.purge_deleted_after: "-1h0m0s" must not be negative`}},
		{name: "size env", env: map[string]string{"BERTH_STORAGE_RESERVE": "lots"}, want: []string{`storage.reserve: "lots" is not a size in bytes`}},
		{name: "negative size", file: "storage:\n  reserve: -5\n", want: []string{`storage.reserve: "-5" must not be negative`}},
		{name: "memtable too small", env: map[string]string{"BERTH_MEMORY_KV_MEMTABLE": "64KiB"}, want: []string{`memory.kv_memtable: "64 KiB" must be between 1MiB and 1GiB`}},
		{name: "read-ahead too far", file: "memory:\n  read_ahead: 100\n", want: []string{`memory.read_ahead: "100" must be between 0 and 64`}},
		{name: "negative read-ahead buffers", file: "memory:\n  read_ahead_buffers: -1\n", want: []string{`memory.read_ahead_buffers: "-1" must not be negative`}},
		{name: "zip layouts too small", file: "memory:\n  zip_layouts: 64KiB\n", want: []string{`memory.zip_layouts: "64 KiB" must be between 1MiB and 4GiB`}},
		// A decimal comma read as a thousands separator was ten times the
		// size meant.
		{name: "a size with a decimal comma", env: map[string]string{"BERTH_MEMORY_ZIP_LAYOUTS": "1,5GB"}, want: []string{`memory.zip_layouts: "1,5GB" is not a size in bytes`}},
		{name: "negative memory limit", file: "memory:\n  limit: -1\n", want: []string{`memory.limit: "-1" must not be negative`}},
		{name: "size unit", file: "storage:\n  reserve: 3 parsecs\n", want: []string{`storage.reserve: "3 parsecs" is not a size in bytes`}},
		{name: "log format", env: map[string]string{"BERTH_LOG_FORMAT": "xml"}, want: []string{`log.format: "xml" is not text or json`}},
		{name: "log level", file: "log:\n  level: loud\n", want: []string{`log.level: "loud"`}},
		{name: "tls half", env: map[string]string{"BERTH_TLS_CERT": "/nonexistent/cert.pem"}, want: []string{`tls.key: "" must be set`, `tls.cert: "/nonexistent/cert.pem" cannot be read`}},
		{name: "login", env: map[string]string{"BERTH_ADMIN_LOGIN": "ad min"}, want: []string{`admin.login: "ad min"`}},
		{name: "email", env: map[string]string{"BERTH_ADMIN_EMAIL": "nobody"}, want: []string{`admin.email: "nobody"`}},
		{name: "unknown key", file: "listne: 127.0.0.1:1\n", want: []string{`unknown key "listne"`}},
		{name: "section as a value", file: "tls: /etc/ssl/berth.pem\n", want: []string{`tls: "/etc/ssl/berth.pem" is not a value but a section of keys: tls.cert, tls.key, tls.http2`}},
		{name: "smtp without from", env: map[string]string{"BERTH_SMTP_HOST": "smtp.example.org"}, want: []string{`smtp.from: "" must be set when smtp.host is set`}},
		{name: "smtp bad from", env: map[string]string{"BERTH_SMTP_HOST": "smtp.example.org", "BERTH_SMTP_FROM": "berth"}, want: []string{`smtp.from: "berth" is not an e-mail address`}},
		{name: "smtp port in host", file: "smtp:\n  host: smtp.example.org:587\n  from: berth@example.org\n", want: []string{`smtp.host: "smtp.example.org:587" is not a host name or address (the port goes in smtp.port)`}},
		{name: "smtp port", env: map[string]string{"BERTH_SMTP_HOST": "smtp.example.org", "BERTH_SMTP_FROM": "berth@example.org", "BERTH_SMTP_PORT": "0"}, want: []string{`smtp.port: "0" is not a port`}},
		{name: "smtp security", env: map[string]string{"BERTH_SMTP_HOST": "smtp.example.org", "BERTH_SMTP_FROM": "berth@example.org", "BERTH_SMTP_SECURITY": "ssl"}, want: []string{`smtp.security: "ssl" is not starttls, tls or none`}},
		{name: "smtp username without password", env: map[string]string{"BERTH_SMTP_HOST": "smtp.example.org", "BERTH_SMTP_FROM": "berth@example.org", "BERTH_SMTP_USERNAME": "berth"}, want: []string{`smtp.username is set but neither smtp.password nor smtp.password_file`}},
		{name: "smtp both passwords", env: map[string]string{"BERTH_SMTP_HOST": "smtp.example.org", "BERTH_SMTP_FROM": "berth@example.org", "BERTH_SMTP_USERNAME": "berth", "BERTH_SMTP_PASSWORD": "secret99", "BERTH_SMTP_PASSWORD_FILE": "/etc/hostname"}, want: []string{`set one, not both`}},
		{name: "smtp password file", env: map[string]string{"BERTH_SMTP_HOST": "smtp.example.org", "BERTH_SMTP_FROM": "berth@example.org", "BERTH_SMTP_USERNAME": "berth", "BERTH_SMTP_PASSWORD_FILE": "/nonexistent/pw"}, want: []string{`smtp.password_file: "/nonexistent/pw" cannot be read`}},
		{name: "smtp ca file", env: map[string]string{"BERTH_SMTP_HOST": "smtp.example.org", "BERTH_SMTP_FROM": "berth@example.org", "BERTH_SMTP_CA_FILE": "/nonexistent/ca.pem"}, want: []string{`smtp.ca_file: "/nonexistent/ca.pem" cannot be read`}},
		{name: "smtp timeout", env: map[string]string{"BERTH_SMTP_HOST": "smtp.example.org", "BERTH_SMTP_FROM": "berth@example.org", "BERTH_SMTP_TIMEOUT": "0s"}, want: []string{`smtp.timeout: "0s" must be positive`}},
		{name: "metadata backend", env: map[string]string{"BERTH_METADATA_BACKEND": "mysql"}, want: []string{`metadata.backend: "mysql" is not badger or postgres`}},
		{name: "postgres without dsn", env: map[string]string{"BERTH_METADATA_BACKEND": "postgres"}, want: []string{`neither metadata.postgres.dsn nor metadata.postgres.dsn_file is set`}},
		{name: "postgres both dsns", env: map[string]string{"BERTH_METADATA_BACKEND": "postgres", "BERTH_METADATA_POSTGRES_DSN": "postgres://berth:secret99@db/berth", "BERTH_METADATA_POSTGRES_DSN_FILE": "/etc/hostname"}, want: []string{`metadata.postgres.dsn and metadata.postgres.dsn_file: set one, not both`}},
		{name: "postgres dsn file", file: "metadata:\n  backend: postgres\n  postgres:\n    dsn_file: /nonexistent/dsn\n", want: []string{`metadata.postgres.dsn_file: "/nonexistent/dsn" cannot be read`}},
		{name: "cluster url alone", env: map[string]string{"BERTH_CLUSTER_ADVERTISE_URL": "https://10.0.0.11:8443"}, want: []string{`cluster.advertise_url and cluster.secret_file: set both`}},
		{name: "cluster secret alone", env: map[string]string{"BERTH_CLUSTER_SECRET_FILE": "/etc/hostname"}, want: []string{`cluster.advertise_url and cluster.secret_file: set both`}},
		{name: "cluster url not https", env: map[string]string{"BERTH_CLUSTER_ADVERTISE_URL": "http://10.0.0.11:8443", "BERTH_CLUSTER_SECRET_FILE": "/etc/hostname"}, want: []string{`cluster.advertise_url: "http://10.0.0.11:8443" is not an https URL`}},
		{name: "cluster url with a path", env: map[string]string{"BERTH_CLUSTER_ADVERTISE_URL": "https://10.0.0.11:8443/berth", "BERTH_CLUSTER_SECRET_FILE": "/etc/hostname"}, want: []string{`cluster.advertise_url: "https://10.0.0.11:8443/berth"`}},
		{name: "cluster files missing", file: "cluster:\n  advertise_url: https://node1:8443\n  secret_file: /nonexistent/secret\n  ca_file: /nonexistent/ca.pem\n", want: []string{`cluster.secret_file: "/nonexistent/secret" cannot be read`, `cluster.ca_file: "/nonexistent/ca.pem" cannot be read`}},
		{name: "two errors", env: map[string]string{"BERTH_LISTEN": "x", "BERTH_LOG_FORMAT": "y"}, want: []string{`listen: "x"`, `log.format: "y"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var args []string
			if tt.file != "" {
				args = []string{"--config", writeFile(t, tt.file)}
			}
			_, err := load(t, args...)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestEmptySection: a section whose every key is commented out, as an
// operator trims the example file, sets nothing and loads as the defaults.
func TestEmptySection(t *testing.T) {
	c, err := load(t, "--config", writeFile(t, "tls:\n  # cert: /etc/ssl/berth.pem\nlog:\ngc:\n  # interval: 1h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c != Default() {
		t.Errorf("empty sections loaded as %+v, want the defaults", c)
	}
}

func TestPasswordNeverEchoed(t *testing.T) {
	t.Setenv("BERTH_ADMIN_PASSWORD", "short")
	_, err := load(t)
	if err == nil || !strings.Contains(err.Error(), "admin.password") {
		t.Fatalf("want an admin.password error, got %v", err)
	}
	if strings.Contains(err.Error(), "short\"") {
		t.Fatalf("error echoes the password: %v", err)
	}
}

func TestMissingConfigFile(t *testing.T) {
	_, err := load(t, "--config", filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("want an error naming the file, got %v", err)
	}
}

// TestReadmeTable checks that README.md's configuration table names every
// key with its flag and environment variable (tls.http2 was once missing).
func TestReadmeTable(t *testing.T) {
	const readme = "../README.md"
	body, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range options() {
		names := []string{o.key, EnvName(o.key)}
		if !o.noFlag {
			names = append(names, "--"+FlagName(o.key))
		}
		for _, n := range names {
			if !strings.Contains(string(body), "`"+n+"`") {
				t.Errorf("%s does not show `%s` (key %s)", readme, n, o.key)
			}
		}
	}
}

// TestExampleFile checks that systemd/berth.yaml names every key and loads.
func TestExampleFile(t *testing.T) {
	const example = "../systemd/berth.yaml"
	body, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range options() {
		leaf := o.key[strings.LastIndex(o.key, ".")+1:]
		if !strings.Contains(string(body), "\n"+leaf+":") && !strings.Contains(string(body), "  "+leaf+":") {
			t.Errorf("%s does not show key %s", example, o.key)
		}
	}
	c, err := load(t, "--config", example)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Data = "/var/lib/berth"
	if c != want {
		t.Errorf("%s differs from the defaults beyond data:\n got %+v\nwant %+v", example, c, want)
	}
}
