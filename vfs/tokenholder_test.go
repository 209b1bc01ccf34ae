package vfs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"berth/vfs"
)

// TestLockTokenCountsOnlyForItsHolder: RFC 4918 6.4 wants a submitted lock
// token honoured only for the principal that created the lock, so a token
// that leaked (a log, a shared proxy, another client of the same share)
// is no key. A lock without a Holder keeps letting any presenter through.
func TestLockTokenCountsOnlyForItsHolder(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	f := e.write(t, top, "f.txt", []byte("1"))
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	below := e.write(t, d.ID, "below.txt", []byte("1"))
	alice := vfs.WriteOptions{Principal: "person:1"}
	bob := vfs.WriteOptions{Principal: "person:2"}
	with := func(o vfs.WriteOptions, tok string) vfs.WriteOptions {
		o.LockTokens = []string{tok}
		return o
	}
	write := func(parent uint64, name string, o vfs.WriteOptions) error {
		_, err := e.fs.WriteFile(ctx, e.root.ID, parent, name, strings.NewReader("2"), o)
		return err
	}

	for _, tokenRequired := range []bool{true, false} {
		lk, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{Holder: "person:1", Duration: time.Minute, TokenRequired: tokenRequired})
		if err != nil {
			t.Fatal(err)
		}
		if err := write(top, "f.txt", with(bob, lk.Token)); !errors.Is(err, vfs.ErrLocked) {
			t.Errorf("tokenRequired %v: another principal's write with the token: %v, want ErrLocked", tokenRequired, err)
		}
		if err := e.fs.Delete(ctx, e.root.ID, f.ID, with(bob, lk.Token)); !errors.Is(err, vfs.ErrLocked) {
			t.Errorf("tokenRequired %v: another principal's delete with the token: %v, want ErrLocked", tokenRequired, err)
		}
		if err := write(top, "f.txt", with(vfs.WriteOptions{}, lk.Token)); !errors.Is(err, vfs.ErrLocked) {
			t.Errorf("tokenRequired %v: a write with the token and no principal: %v, want ErrLocked", tokenRequired, err)
		}
		if err := write(top, "f.txt", with(alice, lk.Token)); err != nil {
			t.Errorf("tokenRequired %v: the holder's write with the token: %v", tokenRequired, err)
		}
		if err := e.fs.Unlock(ctx, e.root.ID, f.ID, lk.Token); err != nil {
			t.Fatal(err)
		}
	}

	// A deep lock on a folder: the same below it, and for a new name in it.
	dl, err := e.fs.Lock(ctx, e.root.ID, d.ID, vfs.LockRequest{Holder: "person:1", Deep: true, Duration: time.Minute, TokenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := write(d.ID, "below.txt", with(bob, dl.Token)); !errors.Is(err, vfs.ErrLocked) {
		t.Errorf("another principal's write below a deep lock with its token: %v, want ErrLocked", err)
	}
	if err := write(d.ID, "new.txt", with(bob, dl.Token)); !errors.Is(err, vfs.ErrLocked) {
		t.Errorf("another principal's new file in a deep-locked folder with its token: %v, want ErrLocked", err)
	}
	if _, err := e.fs.Move(ctx, e.root.ID, below.ID, top, "", with(bob, dl.Token)); !errors.Is(err, vfs.ErrLocked) {
		t.Errorf("another principal's move out of a deep-locked folder with its token: %v, want ErrLocked", err)
	}
	if err := write(d.ID, "below.txt", with(alice, dl.Token)); err != nil {
		t.Errorf("the holder's write below the deep lock: %v", err)
	}
	if err := e.fs.Unlock(ctx, e.root.ID, d.ID, dl.Token); err != nil {
		t.Fatal(err)
	}

	// A lock without a holder is the token's alone.
	anon, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{Duration: time.Minute, TokenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := write(top, "f.txt", with(bob, anon.Token)); err != nil {
		t.Errorf("a write with the token of a lock without holder: %v", err)
	}
}
