// Package berthtest builds a real berth storage stack for the tests and
// benchmarks of the front ends: Badger and the disk chunk store in a
// temporary directory, vfs over them, the account service, an organization,
// and persons with their sync roots. No mocks: it is what the daemon wires,
// with cheap password hashing. Only tests import it.
package berthtest

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"berth/account"
	"berth/kv"
	"berth/kv/badger"
	"berth/vfs"
	"berth/vfs/chunk"
)

// Options shape a Stack; the zero value is a usable default.
type Options struct {
	// Logger for kv and vfs; nil discards.
	Logger *slog.Logger
	// Accounts are the account service's options; zero Argon2 parameters
	// become cheap ones (tests hash many passwords).
	Accounts account.Options
	// Policy of the organization; nil is account.DefaultPolicy.
	Policy *account.Policy
	// Disk are the chunk store's options: a Reserve and a Free function
	// make a disk that fills up.
	Disk chunk.DiskOptions
	// Store is the metadata store to build on, which the Stack then owns
	// and closes (a kv/postgres database, to run a front end's test or
	// benchmark on another engine); nil opens Badger in Dir as DB.
	Store kv.Store
	// Now is vfs's clock (vfs.Options.Now); nil is the wall clock. Tests
	// of expiry move it instead of sleeping, which a loaded machine
	// stretches past the lifetime being tested.
	Now func() time.Time
	// ZipBudget is vfs.Options.ZipBudget (0: vfs.ZipBudget): tests of
	// how zips share it make it small rather than fill 54 MiB.
	ZipBudget int64
}

// Stack is the storage side of a berth, closed by the test's cleanup.
type Stack struct {
	Dir      string               // the data directory, a t.TempDir()
	DB       *badger.DB           // the metadata store, real Badger in Dir; nil with Options.Store
	KV       kv.Store             // the metadata store: DB, or Options.Store
	Chunks   *chunk.Disk          // the content store, on disk in Dir
	FS       *vfs.FS              // vfs over DB and Chunks
	Accounts *account.Service     // the account service over DB
	Org      account.Organization // "Acme", the organization AddPerson puts persons in
}

// New builds a Stack in t.TempDir(); t.Cleanup closes it, after whatever
// the test registers later (a server) has stopped.
func New(t testing.TB, o Options) *Stack {
	t.Helper()
	ctx := context.Background()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Stack{Dir: t.TempDir()}
	var err error
	s.KV = o.Store
	if s.KV == nil {
		s.DB, err = badger.Open(badger.Options{Dir: filepath.Join(s.Dir, "meta"), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		s.KV = s.DB
	}
	s.Chunks, err = chunk.OpenDisk(filepath.Join(s.Dir, "chunks"), o.Disk)
	if err != nil {
		t.Fatal(err)
	}
	s.FS, err = vfs.Open(ctx, s.KV, s.Chunks, vfs.Options{Logger: log, Now: o.Now, ZipBudget: o.ZipBudget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.FS.Close()
		s.KV.Close()
	})
	ao := o.Accounts
	if ao.Argon2 == (account.Argon2Params{}) {
		ao.Argon2 = account.Argon2Params{Memory: 64, Time: 1, Threads: 1}
	}
	s.Accounts = account.New(s.KV, ao)
	s.Org, err = s.Accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Acme", Policy: o.Policy})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// AddPerson creates a person of the organization with a sync root named
// after them, and returns both with an access token.
func (s *Stack) AddPerson(t testing.TB, username, password string) (account.Person, vfs.Root, string) {
	t.Helper()
	ctx := context.Background()
	root, err := s.FS.CreateRoot(ctx, username, vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Accounts.CreatePerson(ctx, account.PersonInput{
		OrganizationID: s.Org.ID, Username: username, Email: username + "@example.com",
		Password: password, RootID: root.ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Counted as share.Service.NewRoot counts a root (account.RootTallies).
	tallies, err := s.Accounts.RootTallies(ctx, p, string(vfs.RootSync))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FS.SetRootTallies(ctx, root.ID, vfs.RootOptions{Tallies: tallies}); err != nil {
		t.Fatal(err)
	}
	toks, err := s.Accounts.IssueTokens(ctx, p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p, root, toks.AccessToken
}

// LogBuffer is a log sink that a server's goroutines may write while the
// test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// LoseChunks removes every chunk file of the Stack whose Dir is dir,
// leaving the metadata as it is: every file then fails at its first read
// of contents, after its download has started, which is how the front
// ends' tests make a download fail half way.
func LoseChunks(t testing.TB, dir string) {
	t.Helper()
	if err := filepath.WalkDir(filepath.Join(dir, "chunks"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			err = os.Remove(p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
