package webdav

import (
	"berth/account"
	"berth/vfs"
)

// sessionMounts is what a session derives from share for its caller: the
// roots it mounts, and the caller's person, policy and options of writes.
type sessionMounts struct {
	mounts []mount
	caller *sessionCaller // the person, policy and options, from the same caller
}

// mountCache keeps each principal's sessionMounts until the store's next
// commit outside file contents (vfs.FS.MetaGeneration). A mount sends every request with its credentials, and asking
// share for the caller's roots and naming them (share.Roots, which reads
// the person's root, their subscriptions and each subscribed root, and
// mountNames) was two fifths of a small GET's CPU in the handler. The
// answer depends only on the caller (read from the store, as of no
// earlier than the generation the entry is kept under) and on records of
// account, share and vfs roots, none of them kv.Content, so it holds
// until a commit of such a record; vfs.Cache drops it then. Under file
// writes that was five read transactions a request, most of a small
// PUT's reads outside its own. Entries are shared
// between requests and never changed: a session keeps its lock tokens in a
// slice of its own (session.tokens).
type mountCache = vfs.Cache[account.Principal, sessionMounts]

// maxCachedSessions bounds mountCache: a few KiB per principal.
const maxCachedSessions = 1024
