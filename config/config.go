// Package config is berth's configuration: one typed Config, its defaults,
// its validation, and loading from a YAML file, BERTH_* environment
// variables and command-line flags (flags win over the environment, which
// wins over the file, which wins over the defaults).
//
// This is the only package that reads the environment or imports viper;
// the daemon hands every other package its own options struct.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/dustin/go-humanize"
	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// EnvPrefix prefixes every environment variable: key tls.cert is read from
// BERTH_TLS_CERT.
const EnvPrefix = "BERTH"

// ConfigFlag is the flag that names the YAML file to read.
const ConfigFlag = "config"

// Config is the whole configuration of a berth process.
type Config struct {
	// Data is the data directory: metadata, chunks, TLS material.
	Data string `mapstructure:"data"`
	// Listen is the HTTPS address (host:port).
	Listen string `mapstructure:"listen"`
	// HTTPListen is an optional plain-HTTP address whose every answer is
	// 400 insecure_transport; empty turns it off.
	HTTPListen string `mapstructure:"http_listen"`
	// PublicURL is the base URL clients reach berth at ("https://files.example.com"),
	// which share-link urls and e-mail notices are built on; empty takes
	// https:// and the request's Host, and notices give the bare path.
	PublicURL string `mapstructure:"public_url"`
	// MetricsListen is the address of the Prometheus /metrics listener;
	// empty turns it off.
	MetricsListen string `mapstructure:"metrics_listen"`
	// TLS names the certificate; empty means a self-signed one kept in
	// the data directory.
	TLS TLS `mapstructure:"tls"`
	// Log configures log/slog output.
	Log Log `mapstructure:"log"`
	// ShutdownGrace is how long in-flight requests may run after SIGTERM.
	ShutdownGrace time.Duration `mapstructure:"shutdown_grace"`
	// Admin is the first administrator, created on first start.
	Admin Admin `mapstructure:"admin"`
	// Organization is the first organization, created on first start.
	Organization Organization `mapstructure:"organization"`
	// OAuth sets token lifetimes.
	OAuth OAuth `mapstructure:"oauth"`
	// Lockout sets the failed-login lockout.
	Lockout Lockout `mapstructure:"lockout"`
	// Activity sets the activity log.
	Activity Activity `mapstructure:"activity"`
	// GC sets the background garbage collection.
	GC GC `mapstructure:"gc"`
	// Policy sets the background jobs that apply the organizations'
	// trim_revisions and purge_deleted policies.
	Policy PolicyJobs `mapstructure:"policy"`
	// WebDAV sets the WebDAV front end.
	WebDAV WebDAV `mapstructure:"webdav"`
	// Storage sets where file contents go and how berth uses the data
	// directory's disk.
	Storage Storage `mapstructure:"storage"`
	// Memory sizes the caches, tables and buffers that make up most of
	// the daemon's resident memory.
	Memory Memory `mapstructure:"memory"`
	// HTTP sets limits of the requests of every listener.
	HTTP HTTP `mapstructure:"http"`
	// SMTP is the server berth sends e-mail through (share invitations,
	// download and upload notifications); no host turns e-mail off.
	SMTP SMTP `mapstructure:"smtp"`
	// Shares sets organization shares' invitations of people outside
	// berth (docs/api.md "Organization shares").
	Shares Shares `mapstructure:"shares"`
	// Tus sets the resumable uploads (docs/api.md "Resumable uploads").
	Tus Tus `mapstructure:"tus"`
	// Directory sets how berth talks to organizations' directory servers
	// (auth sources) and how often it imports their persons.
	Directory Directory `mapstructure:"directory"`
	// TwoStep sets two-step verification (docs/api.md "Two-step verification").
	TwoStep TwoStep `mapstructure:"two_step"`
	// Metadata says which engine holds the metadata (docs/operations.md
	// "Metadata on PostgreSQL").
	Metadata Metadata `mapstructure:"metadata"`
	// Cluster sets how the nodes that share a metadata store reach each
	// other (docs/operations.md "Running several nodes").
	Cluster Cluster `mapstructure:"cluster"`
}

// Cluster sets how a node reaches the other nodes of its cluster, to
// relay calls to machines' agents connected to them. A lone node (Badger)
// ignores it.
type Cluster struct {
	// AdvertiseURL is this node's own HTTPS URL as the other nodes
	// reach it ("https://10.0.0.11:8443"): where they relay calls for
	// the agents connected here. Empty: this node neither relays nor is
	// relayed to (an agent is reachable through the node it is
	// connected to only).
	AdvertiseURL string `mapstructure:"advertise_url"`
	// SecretFile names a file holding the secret every node shares;
	// a relayed call carries it. Set with AdvertiseURL.
	SecretFile string `mapstructure:"secret_file"`
	// CAFile is a PEM file of the certificates the other nodes' TLS
	// certificates must chain to: the cluster's own authority, or every
	// node's self-signed certificate. Empty: the system's authorities.
	CAFile string `mapstructure:"ca_file"`
}

// Metadata chooses the metadata store's engine.
type Metadata struct {
	// Backend is "badger", the embedded store in the data directory (the
	// default, for one node), or "postgres", a PostgreSQL database that
	// several nodes share.
	Backend string `mapstructure:"backend"`
	// Postgres is the database of the "postgres" backend.
	Postgres MetadataPostgres `mapstructure:"postgres"`
}

// MetadataPostgres names the PostgreSQL database of the metadata.
type MetadataPostgres struct {
	// DSN is the connection string (postgres://user:password@host/db or
	// libpq's key=value form); DSNFile names a file holding it instead,
	// which keeps its password out of the configuration. One is set.
	DSN     string `mapstructure:"dsn"`
	DSNFile string `mapstructure:"dsn_file"`
}

// Directory sets the directory servers (auth sources) berth imports
// persons from and checks their passwords against.
type Directory struct {
	// ImportInterval is the time between scheduled imports of every
	// source (the first runs at start); 0 turns them off, leaving
	// imports to POST /api/2/auth_source/<id>/import.
	ImportInterval time.Duration `mapstructure:"import_interval"`
	// Timeout bounds connecting to a server and each request to it.
	Timeout time.Duration `mapstructure:"timeout"`
	// CAFile is a PEM file of the authorities that sign LDAPS servers'
	// certificates; empty trusts the system's.
	CAFile string `mapstructure:"ca_file"`
	// AllowedNetworks are the addresses and networks (comma-separated,
	// as http.trusted_proxies) directory servers may be reached at;
	// empty: any. Every organization's administrators configure
	// directory servers, so a service of many tenants names its
	// directories' networks here, and no administrator has berth
	// connect elsewhere.
	AllowedNetworks string `mapstructure:"allowed_networks"`
}

// TwoStep sets two-step verification.
type TwoStep struct {
	// SMSCommand is the absolute path of a program that sends a text
	// message, run without a shell and without arguments, with
	// BERTH_SMS_TO (the number, E.164), BERTH_SMS_CODE, BERTH_SMS_TEXT
	// (the whole message) and BERTH_SMS_PURPOSE ("sign-in" or
	// "enrollment") in its environment, and the message on its standard
	// input; exit status 0 means sent. Empty: the sms mode is off.
	SMSCommand string `mapstructure:"sms_command"`
	// Issuer names berth in authenticator apps.
	Issuer string `mapstructure:"issuer"`
	// CodeTTL is how long an e-mail or SMS code stays valid.
	CodeTTL time.Duration `mapstructure:"code_ttl"`
}

// SMTP is the mail submission server berth sends e-mail through.
type SMTP struct {
	// Host is the server's name or address; empty sends no e-mail (the
	// daemon says so at start and logs each mail it would have sent).
	Host string `mapstructure:"host"`
	// Port is the server's port: 587 for STARTTLS, 465 for TLS.
	Port int `mapstructure:"port"`
	// Security is "starttls", "tls" (implicit, from the first byte) or
	// "none" (no encryption; AUTH then only to a loopback server).
	Security string `mapstructure:"security"`
	// Username turns AUTH PLAIN on; empty sends without authentication.
	Username string `mapstructure:"username"`
	// Password is the AUTH password; PasswordFile names a file holding
	// it instead, which keeps the secret out of the configuration.
	Password     string `mapstructure:"password"`
	PasswordFile string `mapstructure:"password_file"`
	// From is the sender address, optionally with a display name.
	From string `mapstructure:"from"`
	// Timeout bounds sending one message (connect, TLS, exchange).
	Timeout time.Duration `mapstructure:"timeout"`
	// CAFile is a PEM file of the authorities that sign the server's
	// certificate; empty trusts the system's.
	CAFile string `mapstructure:"ca_file"`
	// InsecureSkipVerify accepts any server certificate: for tests, never
	// for a real server, whose password would go to whoever answers.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
	// MaxPerHour bounds the e-mail sent on one sender's behalf in an
	// hour (share.Options.MailPerHour): one person's share link notices,
	// one top-level organization's share invitations; 0: no bound.
	MaxPerHour int `mapstructure:"max_per_hour"`
}

// HTTP sets limits of the requests of every listener.
type HTTP struct {
	// BodyIdleTimeout ends a request whose body stops arriving: a read of
	// the body that gets no byte for this long fails, the request is
	// answered 408 and an upload stores nothing. It bounds the time
	// between bytes, not the whole body, so a large upload on a slow
	// link is never cut while it moves (nginx's client_body_timeout).
	BodyIdleTimeout time.Duration `mapstructure:"body_idle_timeout"`
	// SendIdleTimeout ends a request whose client stops taking its
	// answer: a write that the client takes nothing of for this long
	// fails and the handler stops. Like BodyIdleTimeout it bounds the
	// time between bytes, not the whole answer (nginx's send_timeout).
	SendIdleTimeout time.Duration `mapstructure:"send_idle_timeout"`
	// TrustedProxies are the addresses and networks (comma-separated,
	// like "10.0.0.5,192.168.0.0/24") of reverse proxies whose
	// X-Forwarded-For berth believes: a request from one of them is
	// taken to come from the address the proxy put last in that header
	// (per-address sign-in limits count it). Empty: the header is
	// ignored, and every request comes from its connection's peer.
	TrustedProxies string `mapstructure:"trusted_proxies"`
	// MaxConnsPerAddress bounds the connections one client address (an
	// IPv6 /64) holds at once on each listener (HTTPS, plain HTTP,
	// metrics); those past it are closed unanswered.
	// Trusted proxies are not counted. 0: no bound.
	MaxConnsPerAddress int `mapstructure:"max_conns_per_address"`
	// MaxHeaderBytes bounds a request's line and headers together (net/http
	// reads 4 KiB more before it checks); past that the request is
	// answered 431. net/http's own bound, 1 MiB, let
	// the connections of one address (MaxConnsPerAddress) hold a
	// gigabyte of headers in flight for the 10 s header timeout: 300
	// connections took berth from 48 to 350 MiB. Browsers, sync clients
	// and WebDAV drives send a few KiB (nginx takes 32 KiB at most).
	MaxHeaderBytes ByteSize `mapstructure:"max_header_bytes"`
}

// Prefixes parses a TrustedProxies list: addresses (a /32 or /128 each)
// and CIDR networks, comma-separated, spaces allowed.
func Prefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or network", f)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or network", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// TLS is the HTTPS certificate. Both files or neither.
type TLS struct {
	// Cert is a PEM certificate chain file.
	Cert string `mapstructure:"cert"`
	// Key is the PEM private key file of Cert.
	Key string `mapstructure:"key"`
	// HTTP2 offers HTTP/2 (ALPN h2) besides HTTP/1.1. Off by default, as
	// in nginx and Apache: Go's HTTP/2 server moves a large download
	// about 40% slower than HTTP/1.1 (curl, 1 GiB over loopback: 360-410
	// against 620 MB/s), and the clients that carry bulk data (WebDAV
	// mounts, rclone, curl) gain nothing from multiplexing.
	HTTP2 bool `mapstructure:"http2"`
}

// Log configures logging.
type Log struct {
	// Format is "text" or "json".
	Format string `mapstructure:"format"`
	// Level is "debug", "info", "warn" or "error".
	Level string `mapstructure:"level"`
}

// Admin is the first administrator.
type Admin struct {
	// Login is the administrator's username.
	Login string `mapstructure:"login"`
	// Email is the administrator's e-mail address (optional).
	Email string `mapstructure:"email"`
	// Password is the initial password; empty means a random one, printed
	// once and written to the data directory.
	Password string `mapstructure:"password"`
}

// Organization is the first organization.
type Organization struct {
	// Name is the organization's name.
	Name string `mapstructure:"name"`
}

// OAuth sets token lifetimes.
type OAuth struct {
	// AccessTokenTTL is the lifetime of an access token (expires_in).
	AccessTokenTTL time.Duration `mapstructure:"access_token_ttl"`
	// RefreshTokenTTL is the lifetime of a refresh token.
	RefreshTokenTTL time.Duration `mapstructure:"refresh_token_ttl"`
	// RefreshReuseGrace is how long a rotated refresh token may come back
	// (a client retrying a refresh whose answer it lost) without revoking
	// its session; 0 revokes at any reuse.
	RefreshReuseGrace time.Duration `mapstructure:"refresh_reuse_grace"`
}

// Shares sets organization shares' invitations.
type Shares struct {
	// InvitationTTL is how long an external subscriber's invitation can
	// be accepted.
	InvitationTTL time.Duration `mapstructure:"invitation_ttl"`
}

// Tus sets the resumable (tus) uploads.
type Tus struct {
	// MaxUploads bounds the resumable uploads one person may have in
	// progress at once (rest.Options.TusMaxUploads); 0: no bound.
	MaxUploads int `mapstructure:"max_uploads"`
}

// Lockout sets how failed logins lock an account.
type Lockout struct {
	// MaxFailures is the number of failed attempts that locks an account.
	MaxFailures int `mapstructure:"max_failures"`
	// Duration is how long the lock lasts.
	Duration time.Duration `mapstructure:"duration"`
	// Window is the time MaxFailures failures must fall within, counted
	// from the first of a series.
	Window time.Duration `mapstructure:"window"`
	// AddressMaxFailures failed sign-ins from one client address (IPv4
	// address, IPv6 /64) within AddressWindow throttle the address for
	// AddressDuration: its attempts are refused (429) unchecked, whatever
	// account they name.
	AddressMaxFailures int           `mapstructure:"address_max_failures"`
	AddressWindow      time.Duration `mapstructure:"address_window"`
	AddressDuration    time.Duration `mapstructure:"address_duration"`
	// KnownAddressTTL is how long a successful sign-in makes its address
	// known for the person, where neither a lock of the account nor a
	// throttle of the address applies to them; 0 turns it off.
	KnownAddressTTL time.Duration `mapstructure:"known_address_ttl"`
	// RefusalDelay holds each refusal of a locked account or throttled
	// address before it is answered; 0 answers at once.
	RefusalDelay time.Duration `mapstructure:"refusal_delay"`
	// HashQueue is the most sign-ins that wait for a password check;
	// more are answered 503 with Retry-After.
	HashQueue int `mapstructure:"hash_queue"`
}

// Activity sets the activity log.
type Activity struct {
	// Retention is how long a record of the log is kept; 0 keeps
	// records forever. Records expire by the store's TTL, without a
	// sweeper.
	Retention time.Duration `mapstructure:"retention"`
	// NotesPerHour bounds the notes one person adds in an hour (POST
	// activity/create; rest.Options.ActivityNotesPerHour); 0: no bound.
	NotesPerHour int `mapstructure:"notes_per_hour"`
}

// GC sets background garbage collection.
type GC struct {
	// Interval is the time between collections; 0 turns them off.
	Interval time.Duration `mapstructure:"interval"`
	// PurgeDeletedAfter makes each collection first purge, in every root,
	// what was deleted longer ago than this, so deleted files free their
	// space; 0 keeps them until purged by hand (berth purge-deleted).
	PurgeDeletedAfter time.Duration `mapstructure:"purge_deleted_after"`
}

// PolicyJobs sets the background jobs that apply each organization's
// trim_revisions and purge_deleted policies to its roots.
type PolicyJobs struct {
	// Interval is the time between runs (the first runs at start); 0
	// turns them off, and the policies are then stored only.
	Interval time.Duration `mapstructure:"interval"`
	// Batch bounds one run: at most this many revisions trimmed and this
	// many deleted items purged; the next run goes on where it stopped.
	Batch int `mapstructure:"batch"`
}

// WebDAV sets the WebDAV front end.
type WebDAV struct {
	// InfiniteDepth allows PROPFIND with Depth: infinity.
	InfiniteDepth bool `mapstructure:"infinite_depth"`
	// MaxXMLBodies bounds the XML bodies (PROPFIND, PROPPATCH, LOCK) one
	// person's requests may be sending at once (webdav.Options.MaxXMLBodies);
	// 0: no bound.
	MaxXMLBodies int `mapstructure:"max_xml_bodies"`
}

// Memory sizes what holds most of the daemon's resident memory; the
// defaults fit a small server (docs/operations.md "Memory").
type Memory struct {
	// Limit is the Go runtime's soft memory limit (runtime/debug's
	// SetMemoryLimit): near it the heap is collected more often and freed
	// memory goes back to the kernel at once. 0 derives it from the
	// other settings (48 MiB + 3 x KVMemtable + UploadBuffers, and
	// ReadAheadBuffers beyond its default of 16 MiB), raised by what the
	// zip layouts hold while zips are served (of ZipLayouts);
	// GOMEMLIMIT in the environment wins (GOMEMLIMIT=off: none).
	Limit ByteSize `mapstructure:"limit"`
	// ReadAhead is how many chunks (about 1 MiB each) a download fetches,
	// verifies and decodes ahead of the one it sends; 0 fetches each when
	// it is sent.
	ReadAhead int `mapstructure:"read_ahead"`
	// ReadAheadBuffers is the memory all downloads share for the chunks
	// they fetch ahead (ReadAhead each at most): past it a download
	// fetches fewer ahead, down to none, and never waits, so stalled
	// downloads hold at most this beside the chunk each sends; 0: none
	// fetched ahead.
	ReadAheadBuffers ByteSize `mapstructure:"read_ahead_buffers"`
	// UploadBuffers is the memory all uploads share for reading their
	// streams ahead in parallel: each upload in progress holds one
	// segment (8 MiB) of its own and takes up to two more from this.
	UploadBuffers ByteSize `mapstructure:"upload_buffers"`
	// KVMemtable is the size of each of the metadata store's two
	// memtables (Go heap, allocated whole); a transaction may write at
	// most 15% of it.
	KVMemtable ByteSize `mapstructure:"kv_memtable"`
	// KVBlockCache caches the metadata store's table blocks; 0: none (the
	// tables are not compressed and are read through the page cache).
	KVBlockCache ByteSize `mapstructure:"kv_block_cache"`
	// KVIndexCache bounds the memory of the metadata store's table
	// indexes and bloom filters; 0 keeps them all in memory.
	KVIndexCache ByteSize `mapstructure:"kv_index_cache"`
	// KVMapTrim is how often the daemon takes back the pages of the
	// metadata store's memory-mapped files from its resident set (they
	// stay in the page cache until the kernel needs the room); 0 never.
	KVMapTrim time.Duration `mapstructure:"kv_map_trim"`
	// ZipLayouts is what the layouts of all the folder zips being served
	// may hold together (vfs.Options.ZipBudget); one requester's zips
	// hold at most half of what the others' leave, so the largest zip's
	// layout is half of it.
	ZipLayouts ByteSize `mapstructure:"zip_layouts"`
}

// Storage sets where file contents go and how berth uses the data
// directory's disk.
type Storage struct {
	// Reserve is the free space berth leaves on the data directory's file
	// system. Below it, uploads and whatever else adds data are refused
	// (REST 503, WebDAV 507) while reads, deletes, purges and logins go on:
	// the metadata store must never meet a full disk, which would stop
	// the daemon. 0 keeps no reserve.
	Reserve ByteSize `mapstructure:"reserve"`
	// Backend is where file contents go: "disk" (the default), chunk
	// files under the data directory; or "s3", objects in the bucket of
	// S3, where several nodes can share them.
	Backend string `mapstructure:"backend"`
	// S3 names the bucket when Backend is "s3".
	S3 S3 `mapstructure:"s3"`
}

// S3 is an S3-compatible object store holding the chunks. Its secrets
// are never keys of the file or flags: they come from the standard
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) of
// the environment, or from an AWS shared credentials file.
type S3 struct {
	// Endpoint is the server's URL (https://s3.eu-west-1.amazonaws.com,
	// http://127.0.0.1:7070); without a scheme it is https.
	Endpoint string `mapstructure:"endpoint"`
	// Bucket holds the chunks; it must exist.
	Bucket string `mapstructure:"bucket"`
	// Region is the bucket's; empty lets the client find it.
	Region string `mapstructure:"region"`
	// Prefix is put before every object name, so the bucket can hold
	// other things too.
	Prefix string `mapstructure:"prefix"`
	// PathStyle puts the bucket in the URL path, for servers without
	// wildcard DNS (MinIO, versitygw, Ceph RGW).
	PathStyle bool `mapstructure:"path_style"`
	// CredentialsFile is an AWS shared credentials file whose [default]
	// profile signs the requests; empty takes the environment's keys.
	CredentialsFile string `mapstructure:"credentials_file"`
	// MaxRequests bounds the requests to the server in flight at once.
	MaxRequests int `mapstructure:"max_requests"`
	// Parallelism is the requests one upload or one download keeps in
	// flight (chunks fetched ahead, Puts going), each holding a chunk
	// of about 1 MiB: every request waits a round trip.
	Parallelism int `mapstructure:"parallelism"`
	// AccessKey, SecretKey and SessionToken are read from the
	// environment by Load when Backend is "s3" and CredentialsFile is
	// empty.
	AccessKey    string `mapstructure:"-"`
	SecretKey    string `mapstructure:"-"`
	SessionToken string `mapstructure:"-"`
}

// The environment variables the S3 credentials are read from: the AWS
// tools' own, so an operator sets them once for berth and the aws CLI.
const (
	EnvS3AccessKey    = "AWS_ACCESS_KEY_ID"
	EnvS3SecretKey    = "AWS_SECRET_ACCESS_KEY"
	EnvS3SessionToken = "AWS_SESSION_TOKEN"
)

// ByteSize is a number of bytes. The file, the environment and flags take
// an integer with an optional SI or IEC unit: 1GiB, 500MB, 1073741824.
type ByteSize int64

// UnmarshalText parses the forms go-humanize's ParseBytes reads, but a
// comma: ParseBytes drops it as a thousands separator, so "1,5GB", a
// decimal comma as much of Europe writes it, read as 15 GB, ten times
// what was meant. A size is written with a decimal point, or none.
func (b *ByteSize) UnmarshalText(text []byte) error {
	if bytes.ContainsRune(text, ',') {
		return fmt.Errorf("%q: write a size without commas (1.5GB, 1536MiB, 1073741824)", text)
	}
	n, err := humanize.ParseBytes(string(text))
	if err != nil {
		return err
	}
	if n > math.MaxInt64 {
		return fmt.Errorf("%s is too large", text)
	}
	*b = ByteSize(n)
	return nil
}

// String writes b in a form UnmarshalText reads back as b: with an IEC
// unit when that is exact, else in bytes. humanize.IBytes alone rounds
// to three digits, so 1500 was written "1.5 KiB", which reads as 1536,
// and a size just under 8 EiB as "8.0 EiB", which does not read at all.
func (b ByteSize) String() string {
	if b < 0 {
		return strconv.FormatInt(int64(b), 10) // only to name a bad value
	}
	s := humanize.IBytes(uint64(b))
	if n, err := humanize.ParseBytes(s); err != nil || n != uint64(b) {
		return strconv.FormatInt(int64(b), 10)
	}
	return s
}

// option is one configuration key. The table below drives defaults, flags,
// environment binding and type checks, so a key is declared once.
type option struct {
	key   string
	def   any // string, int, bool, time.Duration or ByteSize; fixes the key's type
	usage string
	// noFlag keeps secrets off the command line, where ps would show them.
	noFlag bool
}

// options returns every key. A function, not a variable, so nothing can
// change the table at run time.
func options() []option {
	return []option{
		{key: "data", def: "./berth-data", usage: "data directory"},
		{key: "listen", def: "127.0.0.1:8443", usage: "HTTPS listen address"},
		{key: "http_listen", def: "", usage: "plain-HTTP listen address that answers insecure_transport (empty: off)"},
		{key: "metrics_listen", def: "127.0.0.1:9464", usage: "Prometheus /metrics listen address (empty: off)"},
		{key: "public_url", def: "", usage: "base URL clients reach berth at, for share-link urls and e-mail (empty: https:// and the request's host)"},
		{key: "tls.cert", def: "", usage: "TLS certificate file (empty: self-signed in the data directory)"},
		{key: "tls.key", def: "", usage: "TLS private key file"},
		{key: "tls.http2", def: false, usage: "offer HTTP/2 besides HTTP/1.1"},
		{key: "log.format", def: "text", usage: "log format: text or json"},
		{key: "log.level", def: "info", usage: "log level: debug, info, warn or error"},
		{key: "shutdown_grace", def: 30 * time.Second, usage: "time in-flight requests get to finish on shutdown"},
		{key: "admin.login", def: "admin", usage: "first administrator's login"},
		{key: "admin.email", def: "", usage: "first administrator's e-mail"},
		{key: "admin.password", def: "", usage: "first administrator's password (empty: random)", noFlag: true},
		{key: "organization.name", def: "Default", usage: "first organization's name"},
		{key: "oauth.access_token_ttl", def: time.Hour, usage: "access token lifetime"},
		{key: "oauth.refresh_token_ttl", def: 720 * time.Hour, usage: "refresh token lifetime"},
		{key: "oauth.refresh_reuse_grace", def: 30 * time.Second, usage: "how long a rotated refresh token may be retried without revoking its session (0: never)"},
		{key: "shares.invitation_ttl", def: 7 * 24 * time.Hour, usage: "how long an organization share's invitation can be accepted"},
		{key: "tus.max_uploads", def: 1000, usage: "resumable uploads one person may have in progress at once (0: no bound)"},
		{key: "lockout.max_failures", def: 5, usage: "failed logins that lock an account"},
		{key: "lockout.duration", def: 15 * time.Minute, usage: "how long a locked account stays locked"},
		{key: "lockout.window", def: 15 * time.Minute, usage: "time the failures that lock an account must fall within"},
		{key: "lockout.address_max_failures", def: 10, usage: "failed sign-ins from one client address (IPv6: /64) that throttle it"},
		{key: "lockout.address_window", def: 15 * time.Minute, usage: "time the failures that throttle an address must fall within"},
		{key: "lockout.address_duration", def: 15 * time.Minute, usage: "how long a throttled address's sign-ins are refused"},
		{key: "lockout.known_address_ttl", def: 720 * time.Hour, usage: "how long a sign-in makes its address known to the person, exempt from account locks and address throttles (0: off)"},
		{key: "lockout.refusal_delay", def: 3 * time.Second, usage: "how long a refusal of a locked account or throttled address is held before it is answered (0: none)"},
		{key: "lockout.hash_queue", def: 64, usage: "sign-ins that may wait for a password check; more are answered 503"},
		{key: "activity.retention", def: 365 * 24 * time.Hour, usage: "how long activity log records are kept (0: forever)"},
		{key: "activity.notes_per_hour", def: 600, usage: "activity notes (activity/create) one person may add in an hour (0: no bound)"},
		{key: "gc.interval", def: time.Hour, usage: "time between garbage collections (0: off)"},
		{key: "gc.purge_deleted_after", def: time.Duration(0), usage: "purge items deleted longer ago than this at each collection (0: never)"},
		{key: "policy.interval", def: time.Hour, usage: "time between runs of the trim_revisions and purge_deleted policy jobs (0: off)"},
		{key: "policy.batch", def: 10000, usage: "most revisions trimmed, and deleted items purged, by one policy run"},
		{key: "webdav.infinite_depth", def: false, usage: "allow WebDAV PROPFIND with Depth: infinity"},
		{key: "webdav.max_xml_bodies", def: 8, usage: "WebDAV XML bodies (PROPFIND, PROPPATCH, LOCK) one person's requests may be sending at once; more are answered 503 (0: no bound)"},
		{key: "storage.reserve", def: ByteSize(1 << 30), usage: "free space to leave on the data directory's disk; writes stop there (0: none)"},
		{key: "storage.backend", def: "disk", usage: "where file contents are kept: disk (the data directory) or s3"},
		{key: "storage.s3.endpoint", def: "", usage: "S3 server URL, like https://s3.eu-west-1.amazonaws.com (storage.backend s3)"},
		{key: "storage.s3.bucket", def: "", usage: "S3 bucket holding the chunks; it must exist"},
		{key: "storage.s3.region", def: "", usage: "S3 bucket's region (empty: asked of the server)"},
		{key: "storage.s3.prefix", def: "chunks", usage: "prefix of the chunks' object names in the bucket"},
		{key: "storage.s3.path_style", def: false, usage: "put the bucket in the URL path (MinIO, versitygw, Ceph without wildcard DNS)"},
		{key: "storage.s3.credentials_file", def: "", usage: "AWS shared credentials file whose [default] profile signs requests (empty: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"},
		{key: "storage.s3.max_requests", def: 32, usage: "most requests to the S3 server in flight at once"},
		{key: "storage.s3.parallelism", def: 8, usage: "requests one upload or download keeps in flight (each holds a chunk of about 1 MiB)"},
		{key: "memory.limit", def: ByteSize(0), usage: "Go runtime soft memory limit (0: 48 MiB + 3 x kv_memtable + upload_buffers + read_ahead_buffers beyond 16MiB, raised by what zip layouts hold while zips are served; GOMEMLIMIT wins)"},
		{key: "memory.read_ahead", def: 4, usage: "chunks a download fetches and decodes ahead of the one it sends (0: none)"},
		{key: "memory.read_ahead_buffers", def: ByteSize(16 << 20), usage: "memory all downloads share for the chunks they fetch ahead; past it they fetch fewer (0: none)"},
		{key: "memory.upload_buffers", def: ByteSize(0), usage: "upload read-ahead shared by all uploads, beyond one 8 MiB segment each (0: none)"},
		{key: "memory.kv_memtable", def: ByteSize(8 << 20), usage: "size of each of the metadata store's two memtables"},
		{key: "memory.kv_block_cache", def: ByteSize(0), usage: "metadata store block cache (0: none)"},
		{key: "memory.kv_index_cache", def: ByteSize(0), usage: "bound on the metadata store's table indexes in memory (0: all kept)"},
		{key: "memory.kv_map_trim", def: 250 * time.Millisecond, usage: "how often to drop the metadata store's memory-mapped pages from the resident set (0: never)"},
		{key: "memory.zip_layouts", def: ByteSize(54 << 20), usage: "memory the layouts of all folder zips being served share; one requester holds at most half of what others leave"},
		{key: "http.body_idle_timeout", def: time.Minute, usage: "time a request body may send nothing before the request fails with 408"},
		{key: "http.send_idle_timeout", def: time.Minute, usage: "time a client may take nothing of an answer before the request is ended"},
		{key: "two_step.sms_command", def: "", usage: "absolute path of the program that sends two-step codes by text message (empty: no sms mode)"},
		{key: "two_step.issuer", def: "berth", usage: "name of berth in authenticator apps"},
		{key: "two_step.code_ttl", def: 10 * time.Minute, usage: "how long an e-mail or text-message two-step code is valid"},
		{key: "http.trusted_proxies", def: "", usage: "reverse proxies (addresses, CIDR networks, comma-separated) whose X-Forwarded-For is believed (empty: none)"},
		{key: "http.max_header_bytes", def: ByteSize(64 << 10), usage: "bound on a request's line and headers together; net/http allows 4KiB more, and past that answers 431 (4KiB to 1MiB)"},
		{key: "http.max_conns_per_address", def: 1024, usage: "connections one client address (an IPv6 /64) may hold at once on each listener, trusted proxies not counted (0: no bound)"},
		{key: "smtp.host", def: "", usage: "SMTP server that e-mail goes through (empty: no e-mail is sent)"},
		{key: "smtp.port", def: 587, usage: "SMTP server port (587 for starttls, 465 for tls)"},
		{key: "smtp.security", def: "starttls", usage: "SMTP connection security: starttls, tls or none"},
		{key: "smtp.username", def: "", usage: "SMTP AUTH username (empty: no authentication)"},
		{key: "smtp.password", def: "", usage: "SMTP AUTH password", noFlag: true},
		{key: "smtp.password_file", def: "", usage: "file holding the SMTP AUTH password"},
		{key: "smtp.from", def: "", usage: "sender address of berth's e-mail, like \"Berth <berth@example.org>\""},
		{key: "smtp.timeout", def: 30 * time.Second, usage: "time one e-mail may take to send"},
		{key: "smtp.ca_file", def: "", usage: "PEM file of the authorities that sign the SMTP server's certificate (empty: the system's)"},
		{key: "smtp.insecure_skip_verify", def: false, usage: "accept any SMTP server certificate (tests only)"},
		{key: "smtp.max_per_hour", def: 100, usage: "e-mails one person's share link notices, or one top-level organization's share invitations, may send in an hour (0: no bound)"},
		{key: "directory.import_interval", def: time.Hour, usage: "time between scheduled imports of the organizations' directory servers (0: off)"},
		{key: "directory.timeout", def: 10 * time.Second, usage: "time connecting to a directory server, and each request to it, may take; and the whole check a refresh of an imported person makes"},
		{key: "directory.ca_file", def: "", usage: "PEM file of the authorities that sign LDAPS directory servers' certificates (empty: the system's)"},
		{key: "directory.allowed_networks", def: "", usage: "addresses and CIDR networks, comma-separated, that directory servers may be reached at (empty: any)"},
		{key: "metadata.backend", def: "badger", usage: "metadata store: badger (embedded, in the data directory) or postgres (shared by several nodes)"},
		{key: "metadata.postgres.dsn", def: "", usage: "PostgreSQL connection string of the postgres metadata backend", noFlag: true},
		{key: "metadata.postgres.dsn_file", def: "", usage: "file holding the PostgreSQL connection string of the postgres metadata backend"},
		{key: "cluster.advertise_url", def: "", usage: "this node's HTTPS URL as the other nodes reach it, to relay calls to the agents connected here (empty: none)"},
		{key: "cluster.secret_file", def: "", usage: "file holding the secret the nodes share to relay calls to each other"},
		{key: "cluster.ca_file", def: "", usage: "PEM file of the certificates other nodes' TLS certificates must chain to (empty: the system's authorities)"},
	}
}

// FlagName is the command-line flag of a key: "tls.cert" is --tls-cert,
// "http_listen" is --http-listen.
func FlagName(key string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(key)
}

// EnvName is the environment variable of a key: "tls.cert" is BERTH_TLS_CERT.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// RegisterFlags adds --config and one flag per key to fs.
func RegisterFlags(fs *pflag.FlagSet) {
	fs.String(ConfigFlag, "", "YAML configuration file")
	for _, o := range options() {
		if o.noFlag {
			continue
		}
		name := FlagName(o.key)
		usage := o.usage + " (env " + EnvName(o.key) + ")"
		switch d := o.def.(type) {
		case string:
			fs.String(name, d, usage)
		case int:
			fs.Int(name, d, usage)
		case bool:
			fs.Bool(name, d, usage)
		case time.Duration:
			fs.Duration(name, d, usage)
		case ByteSize:
			fs.String(name, d.String(), usage)
		default:
			panic(fmt.Sprintf("config: key %s has unsupported type %T", o.key, o.def))
		}
	}
}

// Default returns the configuration with every default, ignoring the
// environment.
func Default() Config {
	v := viper.New()
	for _, o := range options() {
		v.SetDefault(o.key, o.def)
	}
	var c Config
	if err := v.Unmarshal(&c, decodeHook()); err != nil {
		// The defaults are constants; failing here is a bug in this file.
		panic(err)
	}
	return c
}

// Load reads the configuration. fs holds the flags added by RegisterFlags
// (nil means no flags); its --config names the YAML file, if any. Only
// flags the user set override the environment and the file. The result is
// validated.
func Load(fs *pflag.FlagSet) (Config, error) {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	// An empty variable is a value: BERTH_METRICS_LISTEN= turns metrics off.
	v.AllowEmptyEnv(true)
	v.AutomaticEnv()
	opts := options()
	for _, o := range opts {
		v.SetDefault(o.key, o.def)
	}

	if fs != nil {
		if f := fs.Lookup(ConfigFlag); f != nil && f.Value.String() != "" {
			path := f.Value.String()
			v.SetConfigFile(path)
			v.SetConfigType("yaml")
			if err := v.ReadInConfig(); err != nil {
				return Config{}, fmt.Errorf("config: reading %s: %w", path, err)
			}
			if err := checkKnownKeys(v, opts, path); err != nil {
				return Config{}, err
			}
		}
		for _, o := range opts {
			if f := fs.Lookup(FlagName(o.key)); f != nil {
				if err := v.BindPFlag(o.key, f); err != nil {
					return Config{}, fmt.Errorf("config: binding flag %s: %w", f.Name, err)
				}
			}
		}
	}

	// Check each value's type by hand first, so a bad value fails with the
	// key's name and the value rather than a decoder's message.
	for _, o := range opts {
		if err := checkType(o, v.Get(o.key)); err != nil {
			return Config{}, err
		}
	}
	var c Config
	if err := v.Unmarshal(&c, decodeHook()); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if c.Storage.Backend == "s3" && c.Storage.S3.CredentialsFile == "" {
		c.Storage.S3.AccessKey = os.Getenv(EnvS3AccessKey)
		c.Storage.S3.SecretKey = os.Getenv(EnvS3SecretKey)
		c.Storage.S3.SessionToken = os.Getenv(EnvS3SessionToken)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// decodeHook is viper's default decoding (durations and lists from
// strings) plus types that parse themselves, such as ByteSize.
func decodeHook() viper.DecoderConfigOption {
	return viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		mapstructure.TextUnmarshallerHookFunc(),
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
	))
}

// checkKnownKeys rejects keys in the file that berth does not know, so a
// typo does not silently leave the default in place.
func checkKnownKeys(v *viper.Viper, opts []option, path string) error {
	known := make(map[string]bool, len(opts))
	for _, o := range opts {
		known[o.key] = true
	}
	var unknown []string
	for _, k := range v.AllKeys() {
		if known[k] {
			continue
		}
		if keys := sectionKeys(opts, k); len(keys) > 0 {
			// A section left empty ("tls:" with every key below it
			// commented out) reads back as its defaults, a map: it sets
			// nothing and is fine. "tls: /etc/ssl/cert.pem" reads
			// naturally but sets no key either; calling tls unknown
			// would send the reader looking for a typo.
			if _, empty := v.Get(k).(map[string]any); empty {
				continue
			}
			return fmt.Errorf("config: %s: %s: %q is not a value but a section of keys: %s",
				path, k, fmt.Sprint(v.Get(k)), strings.Join(keys, ", "))
		}
		unknown = append(unknown, k)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("config: %s: unknown key %q", path, unknown[0])
	}
	return nil
}

// sectionKeys returns the keys inside section k ("tls": tls.cert, ...),
// none when k is not a section.
func sectionKeys(opts []option, k string) []string {
	var keys []string
	for _, o := range opts {
		if strings.HasPrefix(o.key, k+".") {
			keys = append(keys, o.key)
		}
	}
	return keys
}

// checkType reports a value that cannot become the key's type.
func checkType(o option, val any) error {
	s := fmt.Sprint(val)
	if val == nil {
		s = ""
	}
	switch o.def.(type) {
	case time.Duration:
		switch x := val.(type) {
		case time.Duration:
			return nil
		case int, int64:
			// YAML integers are nanoseconds to the decoder, which is never
			// what an operator meant.
			return fmt.Errorf("config: %s: %v is not a duration (write it with a unit, like 30s or 15m)", o.key, x)
		}
		if _, err := time.ParseDuration(s); err != nil {
			return fmt.Errorf("config: %s: %q is not a duration (like 30s or 15m)", o.key, s)
		}
	case ByteSize:
		switch val.(type) {
		case ByteSize, int, int64:
			return nil
		}
		var b ByteSize
		if err := b.UnmarshalText([]byte(s)); err != nil {
			return fmt.Errorf("config: %s: %q is not a size in bytes (like 1GiB or 500MB)", o.key, s)
		}
	case int:
		switch val.(type) {
		case int, int64:
			return nil
		}
		if _, err := strconv.Atoi(s); err != nil {
			return fmt.Errorf("config: %s: %q is not an integer", o.key, s)
		}
	case bool:
		if _, ok := val.(bool); ok {
			return nil
		}
		if _, err := strconv.ParseBool(s); err != nil {
			return fmt.Errorf("config: %s: %q is not a boolean (true or false)", o.key, s)
		}
	case string:
		switch val.(type) {
		case map[string]any, []any:
			return fmt.Errorf("config: %s: expected a single value, got %v", o.key, val)
		}
	}
	return nil
}

// Validate checks every value. Its error names the key and the bad value.
func (c Config) Validate() error {
	var errs []error
	bad := func(key string, val any, why string) {
		errs = append(errs, fmt.Errorf("config: %s: %q %s", key, fmt.Sprint(val), why))
	}

	if c.Data == "" {
		bad("data", c.Data, "must not be empty")
	}
	if !isHostPort(c.Listen) {
		bad("listen", c.Listen, "is not host:port")
	}
	if c.HTTPListen != "" && !isHostPort(c.HTTPListen) {
		bad("http_listen", c.HTTPListen, "is not host:port (or empty to turn it off)")
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			bad("public_url", c.PublicURL, "is not an https URL of a host alone, such as https://files.example.com (no path, no trailing slash)")
		}
	}
	if c.MetricsListen != "" && !isHostPort(c.MetricsListen) {
		bad("metrics_listen", c.MetricsListen, "is not host:port (or empty to turn it off)")
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		if c.TLS.Cert == "" {
			bad("tls.cert", c.TLS.Cert, "must be set when tls.key is set")
		} else {
			bad("tls.key", c.TLS.Key, "must be set when tls.cert is set")
		}
	}
	for _, f := range []struct{ key, path string }{{"tls.cert", c.TLS.Cert}, {"tls.key", c.TLS.Key}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			bad(f.key, f.path, "cannot be read: "+errorsCause(err))
		}
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", c.Log.Format, "is not text or json")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", c.Log.Level, "is not debug, info, warn or error")
	}
	if c.ShutdownGrace <= 0 {
		bad("shutdown_grace", c.ShutdownGrace, "must be positive")
	}
	if c.Admin.Login == "" || strings.ContainsFunc(c.Admin.Login, badLoginRune) {
		// Caught here, not at first run, where the organization would
		// already exist and the administrator never be created.
		bad("admin.login", c.Admin.Login, "must be non-empty, without spaces, control characters or ':'")
	}
	if c.Admin.Email != "" {
		if _, err := mail.ParseAddress(c.Admin.Email); err != nil {
			bad("admin.email", c.Admin.Email, "is not an e-mail address")
		}
	}
	if c.Admin.Password != "" && len(c.Admin.Password) < MinPasswordLen {
		// Never echo a password, not even a bad one.
		errs = append(errs, fmt.Errorf("config: admin.password: shorter than %d characters", MinPasswordLen))
	}
	if strings.TrimSpace(c.Organization.Name) == "" {
		bad("organization.name", c.Organization.Name, "must not be empty")
	}
	if c.OAuth.AccessTokenTTL < time.Second {
		// expires_in is whole seconds (spec 5.3); 0 would tell an
		// OAuth client the token never expires.
		bad("oauth.access_token_ttl", c.OAuth.AccessTokenTTL, "must be at least 1s")
	}
	if c.OAuth.RefreshTokenTTL <= 0 {
		bad("oauth.refresh_token_ttl", c.OAuth.RefreshTokenTTL, "must be positive")
	}
	if c.Shares.InvitationTTL < time.Hour || c.Shares.InvitationTTL > 365*24*time.Hour {
		bad("shares.invitation_ttl", c.Shares.InvitationTTL, "must be between 1h and 8760h")
	}
	if c.OAuth.RefreshReuseGrace < 0 || c.OAuth.RefreshReuseGrace > 10*time.Minute {
		// Longer, and a stolen refresh token stays good long after the
		// client has moved on.
		bad("oauth.refresh_reuse_grace", c.OAuth.RefreshReuseGrace, "must be between 0 and 10m")
	}
	if c.Lockout.MaxFailures < 1 {
		bad("lockout.max_failures", c.Lockout.MaxFailures, "must be at least 1")
	}
	if c.Lockout.Duration <= 0 {
		bad("lockout.duration", c.Lockout.Duration, "must be positive")
	}
	if c.Lockout.Window <= 0 {
		bad("lockout.window", c.Lockout.Window, "must be positive")
	}
	if c.Lockout.AddressMaxFailures < 1 {
		bad("lockout.address_max_failures", c.Lockout.AddressMaxFailures, "must be at least 1")
	}
	if c.Lockout.AddressWindow <= 0 {
		bad("lockout.address_window", c.Lockout.AddressWindow, "must be positive")
	}
	if c.Lockout.AddressDuration <= 0 {
		bad("lockout.address_duration", c.Lockout.AddressDuration, "must be positive")
	}
	if c.Lockout.KnownAddressTTL < 0 {
		bad("lockout.known_address_ttl", c.Lockout.KnownAddressTTL, "must not be negative (0 turns it off)")
	}
	if c.Lockout.RefusalDelay < 0 || c.Lockout.RefusalDelay > time.Minute {
		bad("lockout.refusal_delay", c.Lockout.RefusalDelay, "must be between 0 and 1m")
	}
	if c.Lockout.HashQueue < 1 {
		bad("lockout.hash_queue", c.Lockout.HashQueue, "must be at least 1")
	}
	if _, err := Prefixes(c.HTTP.TrustedProxies); err != nil {
		bad("http.trusted_proxies", c.HTTP.TrustedProxies, "is not a comma-separated list of addresses and networks: "+err.Error())
	}
	if _, err := Prefixes(c.Directory.AllowedNetworks); err != nil {
		bad("directory.allowed_networks", c.Directory.AllowedNetworks, "is not a comma-separated list of addresses and networks: "+err.Error())
	}
	if c.Activity.Retention < 0 {
		bad("activity.retention", c.Activity.Retention, "must not be negative (0 keeps records forever)")
	}
	if c.Storage.Reserve < 0 {
		bad("storage.reserve", c.Storage.Reserve, "must not be negative (0 keeps no reserve)")
	}
	switch c.Storage.Backend {
	case "disk":
	case "s3":
		errs = append(errs, c.Storage.S3.validate()...)
	default:
		bad("storage.backend", c.Storage.Backend, "is not disk or s3")
	}
	if c.Memory.Limit < 0 {
		bad("memory.limit", c.Memory.Limit, "must not be negative (0: no limit)")
	}
	if c.Memory.ReadAhead < 0 || c.Memory.ReadAhead > 64 {
		bad("memory.read_ahead", c.Memory.ReadAhead, "must be between 0 and 64")
	}
	if c.Memory.KVMemtable < 1<<20 || c.Memory.KVMemtable > 1<<30 {
		// Below a MiB a transaction could hold barely anything (15%).
		bad("memory.kv_memtable", c.Memory.KVMemtable, "must be between 1MiB and 1GiB")
	}
	if c.Memory.ZipLayouts < 1<<20 || c.Memory.ZipLayouts > 4<<30 {
		// Below a MiB a zip of some 5,000 entries is too large.
		bad("memory.zip_layouts", c.Memory.ZipLayouts, "must be between 1MiB and 4GiB")
	}
	if c.Memory.ReadAheadBuffers < 0 {
		bad("memory.read_ahead_buffers", c.Memory.ReadAheadBuffers, "must not be negative (0: no read-ahead)")
	}
	if c.Memory.UploadBuffers < 0 {
		bad("memory.upload_buffers", c.Memory.UploadBuffers, "must not be negative (0: one segment per upload)")
	}
	if c.Memory.KVBlockCache < 0 {
		bad("memory.kv_block_cache", c.Memory.KVBlockCache, "must not be negative (0: none)")
	}
	if c.Memory.KVIndexCache < 0 {
		bad("memory.kv_index_cache", c.Memory.KVIndexCache, "must not be negative (0: all kept)")
	}
	if c.Memory.KVMapTrim < 0 {
		bad("memory.kv_map_trim", c.Memory.KVMapTrim, "must not be negative (0: never)")
	}
	if c.HTTP.BodyIdleTimeout <= 0 {
		bad("http.body_idle_timeout", c.HTTP.BodyIdleTimeout, "must be positive")
	}
	if c.HTTP.SendIdleTimeout <= 0 {
		bad("http.send_idle_timeout", c.HTTP.SendIdleTimeout, "must be positive")
	}
	if c.SMTP.MaxPerHour < 0 {
		bad("smtp.max_per_hour", c.SMTP.MaxPerHour, "must not be negative (0: no bound)")
	}
	if c.WebDAV.MaxXMLBodies < 0 {
		bad("webdav.max_xml_bodies", c.WebDAV.MaxXMLBodies, "must not be negative (0: no bound)")
	}
	if c.Activity.NotesPerHour < 0 {
		bad("activity.notes_per_hour", c.Activity.NotesPerHour, "must not be negative (0: no bound)")
	}
	if c.Tus.MaxUploads < 0 {
		bad("tus.max_uploads", c.Tus.MaxUploads, "must not be negative (0: no bound)")
	}
	if c.HTTP.MaxHeaderBytes < 4<<10 || c.HTTP.MaxHeaderBytes > 1<<20 {
		bad("http.max_header_bytes", c.HTTP.MaxHeaderBytes, "must be between 4KiB and 1MiB")
	}
	if c.HTTP.MaxConnsPerAddress < 0 {
		bad("http.max_conns_per_address", c.HTTP.MaxConnsPerAddress, "must not be negative (0: no bound)")
	}
	if c.GC.Interval < 0 {
		bad("gc.interval", c.GC.Interval, "must not be negative (0 turns it off)")
	}
	if c.Policy.Interval < 0 {
		bad("policy.interval", c.Policy.Interval, "must not be negative (0 turns it off)")
	}
	if c.Policy.Batch < 1 {
		bad("policy.batch", c.Policy.Batch, "must be at least 1")
	}
	if c.GC.PurgeDeletedAfter < 0 {
		bad("gc.purge_deleted_after", c.GC.PurgeDeletedAfter, "must not be negative (0 never purges)")
	}
	if c.Directory.ImportInterval < 0 {
		bad("directory.import_interval", c.Directory.ImportInterval, "must not be negative (0 turns it off)")
	}
	if c.Directory.Timeout <= 0 {
		bad("directory.timeout", c.Directory.Timeout, "must be positive")
	}
	errs = append(errs, c.SMTP.validate()...)
	errs = append(errs, c.Metadata.validate()...)
	errs = append(errs, c.Cluster.validate()...)
	if c.TwoStep.SMSCommand != "" && !filepath.IsAbs(c.TwoStep.SMSCommand) {
		bad("two_step.sms_command", c.TwoStep.SMSCommand, "must be an absolute path (it runs without a shell)")
	}
	if c.TwoStep.CodeTTL < time.Minute || c.TwoStep.CodeTTL > 24*time.Hour {
		bad("two_step.code_ttl", c.TwoStep.CodeTTL, "must be between 1m and 24h")
	}
	if strings.TrimSpace(c.TwoStep.Issuer) == "" || strings.Contains(c.TwoStep.Issuer, ":") {
		bad("two_step.issuer", c.TwoStep.Issuer, `must not be empty nor hold ":"`)
	}
	return errors.Join(errs...)
}

// validate checks the SMTP section when a host is set; without one the
// other keys are unused and may hold anything.
func (m SMTP) validate() []error {
	if m.Host == "" {
		return nil
	}
	var errs []error
	bad := func(key string, val any, why string) {
		errs = append(errs, fmt.Errorf("config: smtp.%s: %q %s", key, fmt.Sprint(val), why))
	}
	if strings.ContainsFunc(m.Host, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) || strings.Contains(m.Host, ":") && net.ParseIP(m.Host) == nil {
		bad("host", m.Host, "is not a host name or address (the port goes in smtp.port)")
	}
	if m.Port < 1 || m.Port > 65535 {
		bad("port", m.Port, "is not a port (1 to 65535)")
	}
	switch m.Security {
	case "starttls", "tls", "none":
	default:
		bad("security", m.Security, "is not starttls, tls or none")
	}
	if m.From == "" {
		bad("from", m.From, "must be set when smtp.host is set")
	} else if a, err := mail.ParseAddress(m.From); err != nil || strings.ContainsAny(m.From, "\r\n") || !strings.Contains(a.Address, "@") {
		bad("from", m.From, "is not an e-mail address")
	}
	if m.Password != "" && m.PasswordFile != "" {
		errs = append(errs, errors.New("config: smtp.password and smtp.password_file: set one, not both"))
	}
	if m.Username == "" && (m.Password != "" || m.PasswordFile != "") {
		bad("username", m.Username, "must be set when a password is")
	}
	if m.Username != "" && m.Password == "" && m.PasswordFile == "" {
		errs = append(errs, errors.New("config: smtp.password: smtp.username is set but neither smtp.password nor smtp.password_file"))
	}
	for _, f := range []struct{ key, path string }{{"password_file", m.PasswordFile}, {"ca_file", m.CAFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			bad(f.key, f.path, "cannot be read: "+errorsCause(err))
		}
	}
	if m.Timeout <= 0 {
		bad("timeout", m.Timeout, "must be positive")
	}
	return errs
}

// validate checks the metadata backend and, for postgres, that exactly
// one of dsn and dsn_file is set. The DSN is never echoed: it may hold a
// password.
func (m Metadata) validate() []error {
	var errs []error
	switch m.Backend {
	case "badger":
	case "postgres":
		p := m.Postgres
		switch {
		case p.DSN != "" && p.DSNFile != "":
			errs = append(errs, errors.New("config: metadata.postgres.dsn and metadata.postgres.dsn_file: set one, not both"))
		case p.DSN == "" && p.DSNFile == "":
			errs = append(errs, errors.New("config: metadata.postgres.dsn: metadata.backend is postgres but neither metadata.postgres.dsn nor metadata.postgres.dsn_file is set"))
		case p.DSNFile != "":
			if _, err := os.Stat(p.DSNFile); err != nil {
				errs = append(errs, fmt.Errorf("config: metadata.postgres.dsn_file: %q cannot be read: %s", p.DSNFile, errorsCause(err)))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("config: metadata.backend: %q is not badger or postgres", m.Backend))
	}
	return errs
}

// validate checks the cluster section: an advertised URL and a secret
// go together (one without the other relays nothing), and named files
// must exist (their contents are read at start).
func (c Cluster) validate() []error {
	var errs []error
	if c.AdvertiseURL != "" {
		u, err := url.Parse(c.AdvertiseURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			errs = append(errs, fmt.Errorf("config: cluster.advertise_url: %q is not an https URL of a host and port alone, such as https://10.0.0.11:8443", c.AdvertiseURL))
		}
	}
	if (c.AdvertiseURL == "") != (c.SecretFile == "") {
		errs = append(errs, errors.New("config: cluster.advertise_url and cluster.secret_file: set both (to relay calls between nodes) or neither"))
	}
	for _, f := range []struct{ key, path string }{{"secret_file", c.SecretFile}, {"ca_file", c.CAFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("config: cluster.%s: %q cannot be read: %s", f.key, f.path, errorsCause(err)))
		}
	}
	return errs
}

// validate checks the S3 section when it is the backend; otherwise its
// keys are unused and may hold anything.
func (s S3) validate() []error {
	var errs []error
	bad := func(key string, val any, why string) {
		errs = append(errs, fmt.Errorf("config: storage.s3.%s: %q %s", key, fmt.Sprint(val), why))
	}
	if s.Endpoint == "" {
		bad("endpoint", s.Endpoint, "must be set when storage.backend is s3")
	} else {
		e := s.Endpoint
		if !strings.Contains(e, "://") {
			e = "https://" + e
		}
		u, err := url.Parse(e)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
			bad("endpoint", s.Endpoint, "is not an http:// or https:// URL of a host and port alone, such as https://s3.eu-west-1.amazonaws.com")
		}
	}
	if s.Bucket == "" {
		bad("bucket", s.Bucket, "must be set when storage.backend is s3")
	} else if !validBucket(s.Bucket) {
		bad("bucket", s.Bucket, "is not a bucket name (3 to 63 lowercase letters, digits, dots and hyphens)")
	}
	if strings.ContainsFunc(s.Prefix, unicode.IsControl) || strings.Contains(s.Prefix, "//") {
		bad("prefix", s.Prefix, "must not hold control characters or an empty path segment")
	}
	if s.MaxRequests < 1 || s.MaxRequests > 1024 {
		bad("max_requests", s.MaxRequests, "must be between 1 and 1024")
	}
	if s.Parallelism < 1 || s.Parallelism > 64 {
		bad("parallelism", s.Parallelism, "must be between 1 and 64")
	}
	if s.CredentialsFile != "" {
		if _, err := os.Stat(s.CredentialsFile); err != nil {
			bad("credentials_file", s.CredentialsFile, "cannot be read: "+errorsCause(err))
		}
	} else if s.AccessKey == "" || s.SecretKey == "" {
		errs = append(errs, fmt.Errorf("config: storage.s3.credentials_file: empty, and %s and %s are not both set: berth has no S3 credentials", EnvS3AccessKey, EnvS3SecretKey))
	}
	return errs
}

// validBucket reports a name S3 accepts for a bucket (the rules every
// S3 server shares; Amazon's stricter ones are its to tell).
func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i, r := range b {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (r == '.' || r == '-') && i > 0 && i < len(b)-1
		if !ok {
			return false
		}
	}
	return true
}

// badLoginRune reports characters a login cannot hold: Basic auth splits
// on ':', and whitespace or control characters make logins ambiguous.
func badLoginRune(r rune) bool {
	return r == ':' || unicode.IsSpace(r) || unicode.IsControl(r)
}

// MinPasswordLen is the shortest admin.password accepted.
const MinPasswordLen = 8

// isHostPort reports whether s is host:port with a numeric port (port 0
// picks a free one, which tests use).
func isHostPort(s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}

// errorsCause strips the path from an *os.PathError, which the message
// already names.
func errorsCause(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
