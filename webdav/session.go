package webdav

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"berth/account"
	"berth/share"
	"berth/vfs"
)

// session is one authenticated request: who asks, under which policy,
// which roots they reach, and the lock tokens they present.
type session struct {
	h   *Handler
	ctx context.Context
	// sessionCaller (person, policy, the options of writes) is shared
	// with every session of the caller at the same generation
	// (mountCache), and never changed.
	*sessionCaller
	// tokens are the lock tokens the request submitted (the If header,
	// a confirmed lock), the LockTokens of its writes (optsFor).
	tokens []string
	mounts []mount
	path   string // the request's clean dav path
	// at is what path names (resolve), resolved once when the session
	// begins: the permission check, fileAsCollection and the method
	// each ask for it.
	at    target
	atErr error
	// looked holds fileAsCollection's lookup of path for the method's
	// own, which takes it once (lookup): the two would be separate
	// reads anyway, and no write comes between them.
	looked *lookedUp
	// lookedDst holds a COPY's or MOVE's Destination, looked up in the
	// read of its source (lookupPair), for lookupNew to take once.
	lookedDst *lookedNew
	// dest is a COPY's or MOVE's Destination, parsed once (destination).
	dest *destination
	// plain is whether a MOVE is one transaction, decided once
	// (plainMove).
	plain plainMoved
	// wantDead, set by PROPFIND, says whether listings should prefetch
	// dead properties.
	wantDead func() bool
	// wantTags, set by PROPFIND, says whether its answer sends getetag:
	// a collection's is read from its listing hash (listed), which the
	// other properties do not need.
	wantTags bool
}

// sessionCaller is who a session's requests come from: the caller they
// were read with (the person, and the policy they act under), whose Actor
// the changes made without WriteOptions (locks) record, and the options
// of their writes outside any mount's (Principal, the policy's limits),
// without lock tokens. It is kept with the caller's mounts
// (sessionMounts), from the same caller and as of the same generation: no
// commit of account records came since, so the request's own caller has
// the same person, policy and options. Copying them into each session was
// 690 bytes a request, and the options 170 more.
type sessionCaller struct {
	// caller is shared with the sign-in caches (LoginCallerRef and the
	// others), which change none they hand out.
	caller *account.Caller
	opts   vfs.WriteOptions
}

// mount is a root shown as a top-level folder, with what the caller may
// do in it, the policy their writes there are held to and the options of
// those writes (an organization share is held to its organization's
// policy, limits and quotas, not the caller's).
type mount struct {
	name  string
	root  vfs.Root
	perms share.Perm
	// policy is share.Access.Policy: the root's place's, which REST
	// applies too (locked_extensions, user_lock_files), so the same
	// request gets the same answer over both.
	policy account.Policy
	// place is share.Access.Place: the chain of policy's organization,
	// whose administrators alone it does not bind.
	place []uint64
	opts  vfs.WriteOptions
}

// newSession starts the session of caller c for the request's dav path
// reqPath. The roots it mounts, and the options of writes, are share's
// answer for c.
//
// gen is the store's meta generation read before c was: what share
// answers for c is kept in h.mounts until the next commit of something
// other than file contents (see mountCache).
func (h *Handler) newSession(ctx context.Context, gen uint64, c *account.Caller, reqPath string) (*session, error) {
	s := &session{h: h, path: reqPath}
	if m, ok := h.mounts.Get(gen, c.Principal); ok {
		s.mounts, s.sessionCaller = m.mounts, m.caller
		// The changes that take no WriteOptions (locks) find their
		// actor here, for the activity log.
		s.ctx = account.WithCaller(ctx, s.caller)
		s.at, s.atErr = s.resolveIn(reqPath)
		return s, nil
	}
	s.sessionCaller = &sessionCaller{caller: c, opts: share.WriteOptions(*c)}
	s.ctx = account.WithCaller(ctx, s.caller)
	ctx = s.ctx
	reach, err := h.opts.Share.Roots(ctx, *c)
	if err != nil {
		return nil, err
	}
	// An organization share is shown only to a subscriber whose
	// subscription names the webdav channel.
	reach = slices.DeleteFunc(reach, func(a share.Access) bool { return !a.WebDAV })
	s.mounts = mountNames(reach, c.Person.RootID)
	h.mounts.Put(gen, c.Principal, sessionMounts{mounts: s.mounts, caller: s.sessionCaller})
	s.at, s.atErr = s.resolveIn(reqPath)
	return s, nil
}

// optsFor are the options of a write into root id: the mount's, with the
// lock tokens the request submitted.
func (s *session) optsFor(id uint64) vfs.WriteOptions {
	for i := range s.mounts {
		if s.mounts[i].root.ID == id {
			o := s.mounts[i].opts
			o.LockTokens = s.tokens
			return o
		}
	}
	o := s.opts
	o.LockTokens = s.tokens
	return o
}

// policyOf is the policy of writes at t: its mount's
// (share.Access.Policy); the list of roots has none, and the caller's
// own answers for it.
func (s *session) policyOf(t target) *account.Policy {
	if t.top() {
		return &s.caller.Organization.Policy
	}
	return &t.m.policy
}

// binds reports whether policyOf(t)'s user_* switches and
// locked_extensions bind the caller (account.Policy.Binds): in a root's
// place, unless they administer its organization or one above it; at the
// list of roots, their own organization's, unless they administer it.
func (s *session) binds(t target) bool {
	return s.policyOf(t).Binds(s.caller.Person, s.placeOf(t))
}

// placeOf is the chain of the organization whose policy policyOf(t) is.
func (s *session) placeOf(t target) []uint64 {
	if t.top() {
		return s.caller.Chain
	}
	return t.m.place
}

// permitted refuses a change at dav path p that the caller's permissions
// in its root do not allow (errShareReadOnly); the top and unknown roots
// are left to the methods, which answer them as before.
func (s *session) permitted(p string, need share.Perm) error {
	t, err := s.resolve(p)
	if err != nil || t.top() {
		return nil
	}
	if !t.m.perms.Has(need) {
		return errShareReadOnly
	}
	return nil
}

// mountNames names each root's folder after the root: the caller's own
// root (own) first, then the others in the order they took their names
// (vfs.Root.Named), then id, so a clash is resolved the same way every
// time: the later root gets " (id)". Own first: in id order, an
// administrator who renamed an older share to the name of a
// subscriber's own root took the plain name, and the subscriber's
// client, mapped to it, wrote into the share. By when the name was
// taken: in id order, the administrators of an older share who renamed
// it to a newer share's name took it the same way, from a share they
// need not administer.
func mountNames(reach []share.Access, own uint64) []mount {
	slices.SortFunc(reach, func(a, b share.Access) int {
		if ao, bo := a.Root.ID == own, b.Root.ID == own; ao != bo {
			if ao {
				return -1
			}
			return 1
		}
		return cmp.Or(a.Root.Named.Compare(b.Root.Named), compareID(a.Root.ID, b.Root.ID))
	})
	seen := map[string]bool{}
	out := make([]mount, 0, len(reach))
	for _, a := range reach {
		r := a.Root
		name := strings.NewReplacer("/", "_", "\\", "_").Replace(r.Name)
		if name == "" || name == "." || name == ".." {
			name = "root"
		}
		if seen[strings.ToLower(name)] {
			name = fmt.Sprintf("%s (%d)", name, r.ID)
		}
		seen[strings.ToLower(name)] = true
		out = append(out, mount{name: name, root: r, perms: a.Perms, policy: a.Policy, place: a.Place, opts: a.Opts})
	}
	return out
}

func compareID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// target is what a dav path names: the list of roots (m == nil), or a path
// (rel, "/" for the root's top folder) within one root.
type target struct {
	m   *mount
	rel string
}

func (t target) top() bool { return t.m == nil }

// errNoRoot is a dav path whose first segment names no root the caller
// reaches. It is vfs.ErrNotExist (a read of it is 404); a write that
// would create something there answers noRoot.
var errNoRoot = fmt.Errorf("%w: no such root", vfs.ErrNotExist)

// noRoot answers a request that would create the resource at dav path p
// whose first segment names no root: directly below the mount's top only
// roots live, and WebDAV does not make them (403); deeper, the parent
// collection is missing (409, as RFC 4918 9.3.1 and 9.7.1 want of MKCOL
// and PUT).
func noRoot(p string) error {
	if !strings.Contains(strings.Trim(p, "/"), "/") {
		return errRootsNotCreated
	}
	return errParentMissing
}

// resolve splits a clean dav path; an unknown first segment is
// os.ErrNotExist. The request's own path was split when the session
// began (at).
func (s *session) resolve(p string) (target, error) {
	if p == s.path {
		return s.at, s.atErr
	}
	return s.resolveIn(p)
}

// resolveIn is resolve's answer, found in the session's mounts.
func (s *session) resolveIn(p string) (target, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return target{}, nil
	}
	first, _, _ := strings.Cut(p, "/")
	// "/" and what follows the first segment: p's own bytes, where
	// "/" + rest was a new string every request.
	rel := p[len(first):]
	if rel == "" {
		rel = "/"
	}
	for i := range s.mounts {
		if s.mounts[i].name == first {
			return s.equivalent(target{m: &s.mounts[i], rel: rel}), nil
		}
	}
	// A root's name as macOS's client sends it, decomposed (see
	// vfs.FS.Equivalent): the first mount of an equivalent name.
	for i := range s.mounts {
		if vfs.EquivalentNames(s.mounts[i].name, first) {
			return s.equivalent(target{m: &s.mounts[i], rel: rel}), nil
		}
	}
	return target{}, &os.PathError{Op: "resolve", Path: p, Err: os.ErrNotExist}
}

// equivalent is t with its path in the names the root holds where the
// request sent canonically equivalent ones that name nothing as they are
// (vfs.FS.Equivalent): macOS's WebDAV client sends every path decomposed
// (NFD), and found nothing written precomposed (NFC) by anyone else.
func (s *session) equivalent(t target) target {
	t.rel = s.h.opts.FS.Equivalent(s.ctx, t.m.root.ID, t.rel)
	return t
}

// node looks a target up: the top is a synthetic folder.
func (s *session) node(t target) (vfs.Node, error) {
	if t.top() {
		n := vfs.Node{Dir: true, Path: "/"}
		for _, m := range s.mounts {
			if m.root.Created.After(n.Modified) {
				n.Modified = m.root.Created
			}
		}
		n.Created = n.Modified
		return n, nil
	}
	n, err := s.lookupRel(t.m.root.ID, t.rel)
	if err != nil {
		return n, err
	}
	if n.ParentID == 0 {
		n.Name = t.m.name
	}
	return n, nil
}

// parent resolves the folder that would hold t and t's name in it.
func (s *session) parent(t target) (vfs.Node, string, error) {
	dir, name := path.Split(strings.TrimSuffix(t.rel, "/"))
	if dir == "/" {
		// The root's top folder, which lives as long as the root the
		// mount holds: no read. A write into it checks it again in its
		// transaction, as it does any parent.
		r := t.m.root
		return vfs.Node{ID: r.FolderID, RootID: r.ID, Dir: true, Path: "/", Name: t.m.name, Created: r.Created}, name, nil
	}
	n, err := s.lookupRel(t.m.root.ID, dir)
	if err != nil {
		return n, name, err
	}
	if !n.Dir {
		return n, name, fmt.Errorf("%w: %q", vfs.ErrNotDir, dir)
	}
	return n, name, nil
}

// isMountRoot reports whether t is a root's top folder (or the list of roots).
func (t target) isMountRoot() bool { return t.m == nil || t.rel == "/" }

// davPathOf is the dav path of a node of mount m.
func davPathOf(m *mount, n vfs.Node) string {
	if n.Path == "/" || n.Path == "" {
		return "/" + m.name
	}
	return "/" + m.name + n.Path
}

// lockTimeout bounds WebDAV lock durations: a crashed client must not
// leave a file locked forever.
const (
	defaultLockTimeout = time.Hour
	maxLockTimeout     = 7 * 24 * time.Hour
)

// lookupRel resolves a root-relative path to a live node.
func (s *session) lookupRel(root uint64, rel string) (vfs.Node, error) {
	return s.h.opts.FS.Lookup(s.ctx, root, rel)
}
