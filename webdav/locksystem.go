package webdav

import (
	"time"

	xwebdav "golang.org/x/net/webdav"

	"berth/vfs"
)

// lockSystem is x/net/webdav's LockSystem over vfs locks, the one lock
// table REST uses too. Its methods take no context, so it is made per
// session. berth's own LOCK, UNLOCK and write handlers call vfs directly;
// this type serves the library's code paths.
type lockSystem struct{ s *session }

var _ xwebdav.LockSystem = (*lockSystem)(nil)

// Confirm checks that every state token of conditions names a live lock
// covering name0 or name1, and records the tokens as presented; vfs
// refuses the write itself if a lock it needs is not among them.
func (l *lockSystem) Confirm(now time.Time, name0, name1 string, conditions ...xwebdav.Condition) (func(), error) {
	for _, c := range conditions {
		if c.Token == "" || c.Not {
			continue
		}
		ok := false
		for _, name := range []string{name0, name1} {
			if name == "" {
				continue
			}
			if _, _, err := l.s.findLock(name, c.Token); err == nil {
				ok = true
			}
		}
		if !ok {
			return nil, xwebdav.ErrConfirmationFailed
		}
		l.s.tokens = append(l.s.tokens, c.Token)
	}
	return func() {}, nil
}

// Create takes an exclusive write lock on an existing resource.
func (l *lockSystem) Create(now time.Time, d xwebdav.LockDetails) (string, error) {
	lk, _, err := l.s.takeLock(d.Root, vfs.LockRequest{
		Owner: d.OwnerXML, Duration: d.Duration, Deep: !d.ZeroDepth,
	})
	if err != nil {
		return "", osErr("lock", d.Root, err)
	}
	return lk.Token, nil
}

// Refresh extends a lock found on the request's resource or above it.
func (l *lockSystem) Refresh(now time.Time, token string, d time.Duration) (xwebdav.LockDetails, error) {
	n, lk, err := l.s.findLock(l.s.path, token)
	if err != nil {
		return xwebdav.LockDetails{}, osErr("refresh", l.s.path, err)
	}
	t, _ := l.s.resolve(l.s.path)
	lk, err = l.s.h.opts.FS.RefreshLock(l.s.ctx, t.m.root.ID, n.ID, token, d)
	if err != nil {
		return xwebdav.LockDetails{}, osErr("refresh", l.s.path, err)
	}
	return xwebdav.LockDetails{Root: davPathOf(t.m, n), Duration: d, OwnerXML: lk.Owner, ZeroDepth: !lk.Deep}, nil
}

// Unlock removes a lock found on the request's resource or above it.
func (l *lockSystem) Unlock(now time.Time, token string) error {
	n, _, err := l.s.findLock(l.s.path, token)
	if err != nil {
		return osErr("unlock", l.s.path, err)
	}
	t, _ := l.s.resolve(l.s.path)
	return osErr("unlock", l.s.path, l.s.h.opts.FS.Unlock(l.s.ctx, t.m.root.ID, n.ID, token))
}
