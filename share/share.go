// Package share decides who may reach what: which roots an authenticated
// caller reaches, what they may do in each, and the options that carry
// their organization's policy into every vfs write there. It is the one
// access API the front ends ask before they touch vfs, so REST, WebDAV and
// the share-link pages cannot come to disagree about it.
//
// Today a caller reaches the sync root they own, with every permission.
// The sharing issue widens this to share roots and their subscribers: a
// root reached through a share then comes back from the same calls with
// its own permissions and options, and the front ends do not change.
package share

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"berth/account"
	"berth/kv"
	"berth/vfs"
)

// Errors returned by the Service, besides those of vfs and account it
// passes on. They are declared once here and compared with errors.Is; each
// front end maps them in its error table.
var (
	// ErrNoRoot: the caller reaches no root of that id. A root that exists
	// but is someone else's gets the same answer as one that does not, so
	// the answer does not tell which roots exist.
	ErrNoRoot = errors.New("share: no such root")
)

// Perm is a set of things a caller may do with a root and everything in
// it, as bits. It is a value, not a role, so a root reached through a
// share can carry exactly what that share grants.
type Perm uint8

// The permissions. Front ends show them (REST's permissions lists) and
// check them before calling vfs.
const (
	// View: see the items in listings and read their metadata.
	View Perm = 1 << iota
	// Read: read the contents (download, zip).
	Read
	// Write: create and change items, rename and move them.
	Write
	// Delete: delete items and purge deleted ones.
	Delete
	// Reshare: share items onward. The organization's policy still
	// decides whether its persons share at all (Policy.UserCreateShares).
	Reshare
)

// Owner is what a root's owner may do in it: everything. What the
// organization's policy withholds from its persons (locking, sharing) is
// in Access.Policy, not taken out of the permissions.
const Owner = View | Read | Write | Delete | Reshare

// Has reports whether p holds every permission of q.
func (p Perm) Has(q Perm) bool { return p&q == q }

// String lists the permissions by name, for logs and test failures:
// "view|read|write".
func (p Perm) String() string {
	names := []string{"view", "read", "write", "delete", "reshare"}
	var out []string
	for i, n := range names {
		if p&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	if rest := p &^ (1<<len(names) - 1); rest != 0 {
		out = append(out, fmt.Sprintf("%#x", uint8(rest)))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "|")
}

// Access is a root the caller reaches and on what terms.
type Access struct {
	// Root is the root reached, live.
	Root vfs.Root
	// Perms is what the caller may do in it.
	Perms Perm
	// Policy is the organization policy the caller acts under there (what
	// it lets its persons do: lock files, share, use WebDAV).
	Policy account.Policy
	// Place is the chain of the organization whose policy Policy is,
	// that organization first: its user_* switches and locked_extensions
	// bind everyone but the administrators of those organizations
	// (account.Policy.Binds), not every administrator.
	Place []uint64
	// Opts carry the caller's principal and the policy's limits (maximum
	// file size, quota, excluded extensions) to every vfs write in the
	// root. A front end adds what belongs to one request (lock tokens, a
	// declared size, preconditions) to a copy.
	Opts vfs.WriteOptions
	// WebDAV says whether WebDAV shows the root as a folder: every root
	// the caller owns, and an organization share only when one of the
	// caller's subscriptions names the webdav channel.
	WebDAV bool
}

// Options are what the Service needs. The daemon fills them.
type Options struct {
	// FS holds the roots.
	FS *vfs.FS
	// Accounts holds organizations, persons and who owns each root.
	Accounts *account.Service
	// Store keeps share links (link.go). Nil: link calls answer
	// ErrNoLinks.
	Store kv.Store
	// Notifier sends the creator's download and upload notices of links
	// with download_notify or upload_notify. Nil sends none.
	Notifier Notifier
	// PublicURL is the base of link urls in those notices (as
	// rest.Options.PublicURL); empty: the notice gives the path /s/<hash>.
	PublicURL string
	// InvitationTTL is how long an organization share's invitation can
	// be accepted (AcceptInvitation); 0 means DefaultInvitationTTL.
	InvitationTTL time.Duration
	// Now is the clock invitations expire by. Nil: time.Now.
	Now func() time.Time
	// MailPerHour bounds the e-mail sent on one sender's behalf in an
	// hour (mailbudget.go): the notices of one person's links, past which
	// they are not sent, and the invitations of one top-level
	// organization's shares, past which SetSubscribers refuses an update
	// that would invite more. 0 means DefaultMailPerHour, less than 0 no
	// bound.
	MailPerHour int
	// Logger says when a sender's notices are used up. Nil: discarded.
	Logger *slog.Logger
}

// Service answers who may reach what. Build it with New; it is safe for
// concurrent use.
type Service struct {
	fs       *vfs.FS
	accounts *account.Service
	db       kv.Store
	notify   Notifier
	// publicURL: Options.PublicURL.
	publicURL string
	// subscriptions keeps each person's subscribed shares until the store's
	// next commit outside file content (kv.MetaGeneration): WebDAV asks
	// Roots on every request.
	subscriptions *kv.Cache[uint64, []uint64]
	// grants keeps what each share's subscriber entries grant, by root,
	// until the store's next commit outside file content: every request
	// into a share asks it (subscription).
	grants *kv.Cache[uint64, *grants]
	// inviteTTL and now: Options.InvitationTTL and Options.Now, defaulted.
	inviteTTL time.Duration
	now       func() time.Time
	// mail bounds the notices and invitations of each sender.
	mail *account.Budget
	log  *slog.Logger
}

// New returns the Service over o.
func New(o Options) *Service {
	db := o.Store
	if db == nil && o.Accounts != nil {
		db = o.Accounts.Store()
	}
	s := &Service{fs: o.FS, accounts: o.Accounts, db: db, notify: o.Notifier, publicURL: o.PublicURL, subscriptions: kv.NewCache[uint64, []uint64](4096),
		grants:    kv.NewCache[uint64, *grants](maxCachedGrants),
		inviteTTL: o.InvitationTTL, now: o.Now}
	if s.inviteTTL <= 0 {
		s.inviteTTL = DefaultInvitationTTL
	}
	if s.now == nil {
		s.now = time.Now
	}
	perHour := o.MailPerHour
	if perHour == 0 {
		perHour = DefaultMailPerHour
	}
	s.mail = newMailBudget(perHour, s.now)
	s.log = o.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Root returns the access of caller c to root id.
//
// Errors: ErrNoRoot when c does not reach a root of that id (someone
// else's, or none at all); vfs.ErrRootDeleted when c's own root was
// deleted; account.ErrInactive when c's person or organization is
// disabled; vfs's errors of reading the root.
func (s *Service) Root(ctx context.Context, c account.Caller, id uint64) (Access, error) {
	if err := active(c); err != nil {
		return Access{}, err
	}
	if id == 0 {
		return Access{}, ErrNoRoot
	}
	a := Access{Perms: Owner, Policy: c.Organization.Policy, Place: c.Chain, Opts: WriteOptions(c), WebDAV: true}
	if id != c.Person.RootID {
		o, err := s.othersRoot(ctx, c, id)
		if err != nil {
			return Access{}, err
		}
		a = o
	}
	r, err := s.fs.Root(ctx, id)
	if errors.Is(err, vfs.ErrNotExist) {
		return Access{}, ErrNoRoot
	}
	if err != nil {
		return Access{}, err
	}
	a.Root = r
	return a, nil
}

// othersRoot decides c's access to root id, which is not c's sync root:
// another root c owns, or a root of a person in an organization c
// administers where its policy has admin_browse_files, and c's own
// organization's too unless that is top-level (browses; read only,
// under the owner's policy).
// Anything else is ErrNoRoot.
//
// A share root of an organization (owned by no person) is reached by
// its subscribers and by the administrators of its organization and of
// those above, under that organization's policy and quotas (shareAccess).
func (s *Service) othersRoot(ctx context.Context, c account.Caller, id uint64) (Access, error) {
	if s.accounts == nil {
		return Access{}, ErrNoRoot
	}
	p, err := s.accounts.RootPlaceOf(ctx, id)
	if errors.Is(err, account.ErrNotFound) {
		return Access{}, ErrNoRoot
	}
	if err != nil {
		return Access{}, err
	}
	if o := p.Owner; o.PersonID != 0 && o.PersonID == c.Person.ID {
		return Access{Perms: Owner, Policy: c.Organization.Policy, Place: c.Chain, Opts: WriteOptions(c), WebDAV: true}, nil
	}
	if p.Owner.PersonID == 0 && p.Owner.Type == string(vfs.RootShare) {
		perms, dav, opts, err := s.shareAccess(ctx, c, p)
		if err != nil {
			return Access{}, err
		}
		return Access{Perms: perms, Policy: p.Policy, Place: p.Chain, Opts: opts, WebDAV: dav}, nil
	}
	if !c.Person.Admin || c.Person.Guest || p.Owner.PersonID == 0 ||
		!account.Within(p.Chain, c.Person.OrganizationID) || !browses(c, p.Organization) {
		return Access{}, ErrNoRoot
	}
	return Access{Perms: View | Read, Policy: p.Policy, Place: p.Chain, Opts: WriteOptions(c)}, nil
}

// browses reports whether administrator c, who manages org, may read the
// roots of org's persons: org's policy has admin_browse_files, and so
// does the policy c acts under (their organization's, withheld where an
// ancestor below the top level withholds it: account's effectivePolicy),
// which binds its administrators everywhere they manage, as
// admin_create_users does (orgAllows): with org's alone, a child's
// administrators, whom the parent withheld it from, made a grandchild,
// whose policy they set, turned it on there and read its persons' files;
// with their own organization's alone, they made an administrator in the
// grandchild and browsed as that one. A top-level organization's own
// switch does not bind its administrators below it: they set it
// themselves, so it withholds nothing from them, and they browse a child
// that allows it as before.
func browses(c account.Caller, org account.Organization) bool {
	return org.Policy.AdminBrowseFiles && (c.Organization.ParentID == 0 || c.Organization.Policy.AdminBrowseFiles)
}

// BrowsesRemote reports whether administrator c, who manages org (the
// organization of a machine's person), may reach that person's machine
// (list its folders, map a folder of it to a root, which brings the
// folder's files up): org's policy has admin_browse_remote, and so does
// the policy c acts under unless c's organization is top-level, as
// browses rules admin_browse_files. With the owner's policy alone, a
// child's administrators whom the parent withheld it from made a
// grandchild, turned it on there and listed its persons' disks.
func BrowsesRemote(c account.Caller, org account.Organization) bool {
	return org.Policy.AdminBrowseRemote && (c.Organization.ParentID == 0 || c.Organization.Policy.AdminBrowseRemote)
}

// Roots returns the access of caller c to every live root c reaches, in
// no particular order; none is an empty list, not an error. A deleted or
// missing root is left out.
//
// Errors: account.ErrInactive when c's person or organization is
// disabled; vfs's errors of reading the roots.
func (s *Service) Roots(ctx context.Context, c account.Caller) ([]Access, error) {
	if err := active(c); err != nil {
		return nil, err
	}
	var out []Access
	if id := c.Person.RootID; id != 0 {
		r, err := s.fs.Root(ctx, id)
		switch {
		case err == nil:
			out = append(out, own(c, r))
		case !errors.Is(err, vfs.ErrNotExist) && !errors.Is(err, vfs.ErrRootDeleted):
			return nil, err
		}
	}
	if s.accounts == nil {
		return out, nil
	}
	// The organization shares c subscribes to (those c reaches only as
	// an administrator are listed under the organization, not here).
	ids, err := s.subscribedRoots(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		a, err := s.Root(ctx, c, id)
		switch {
		case err == nil:
			out = append(out, a)
		case !errors.Is(err, ErrNoRoot) && !errors.Is(err, vfs.ErrNotExist) && !errors.Is(err, vfs.ErrRootDeleted):
			return nil, err
		}
	}
	return out, nil
}

// WriteOptions are the options of c's writes into a root c owns: c's
// principal, their organization policy's size and extension limits, and
// the quotas on the tallies such a root counts into (account.Caller.Quotas:
// c's own space_quota, and that of their organization and of every
// ancestor, each on the sum over its subtree). Access.Opts holds them for
// an own root; a front end that needs c's options outside any one root
// (WebDAV's session) takes them here.
func WriteOptions(c account.Caller) vfs.WriteOptions {
	pol := c.Organization.Policy
	o := vfs.WriteOptions{
		Principal:          c.Person.Principal(),
		Actor:              c.Actor(),
		MaxFileSize:        pol.MaxFileSize,
		ExcludedExtensions: pol.ExcludedExtensionList(),
	}
	for _, q := range c.Quotas() {
		o.Quotas = append(o.Quotas, vfs.Quota{Tally: q.Tally, Bytes: q.Bytes, Shared: q.Shared})
	}
	return o
}

// own is c's access to root r, which c owns.
func own(c account.Caller, r vfs.Root) Access {
	return Access{Root: r, Perms: Owner, Policy: c.Organization.Policy, Place: c.Chain, Opts: WriteOptions(c), WebDAV: true}
}

// active refuses a caller whose person or organization is disabled. The
// account service hands out no such caller; checking here as well means
// no front end reaches a root for one, however it came by the caller.
func active(c account.Caller) error {
	if !c.Person.Active || !c.Organization.Active {
		return account.ErrInactive
	}
	return nil
}
