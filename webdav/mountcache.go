package webdav

import (
	"berth/account"
	"berth/vfs"
)

// sessionMounts is what a session derives from share for its caller: the
// roots it mounts and the options of the caller's writes.
type sessionMounts struct {
	opts   vfs.WriteOptions
	mounts []mount
}

// mountCache keeps each principal's sessionMounts until the store's next
// commit. A mount sends every request with its credentials, and asking
// share for the caller's roots and naming them (share.Roots, which reads
// the person's root, their subscriptions and each subscribed root, and
// mountNames) was two fifths of a small GET's CPU in the handler. The
// answer depends only on the caller (read from the store, as of no
// earlier than the generation the entry is kept under) and on the store,
// so it holds until a commit; vfs.Cache drops it then. Entries are shared
// between requests and never changed: a session appends its lock tokens
// to a nil slice of its own copy of opts.
type mountCache = vfs.Cache[account.Principal, sessionMounts]

// maxCachedSessions bounds mountCache: a few KiB per principal.
const maxCachedSessions = 1024
