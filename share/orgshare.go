package share

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"

	"berth/account"
	"berth/kv"
	"berth/vfs"
)

// Organization shares (spec 4.7). A share is a vfs root of type share owned
// by an organization alone (account.RootOwner with PersonID 0): its bytes
// count to the organization and its ancestors, never to a person, and
// writes into it are held to their quotas, whoever writes. Who reaches it
// is its subscribers: persons and groups of the organization (or of an
// organization below it), each with a channel and a role, and people
// outside it by e-mail address, invited until they accept.
//
// Key layout (prefixes in kv/prefixes.go):
//
//	shrsubs/<root>             subsRec    the share's subscribers
//	shrperson/<person><root>   empty      shares a person subscribes to directly
//	shrgroup/<group><root>     empty      shares a group subscribes to
//	shrinvite/<sha256(token)>  inviteRec  an external subscriber's invitation
//	shrrootinv/<root><sha256(token)>  empty  the share's invitations
const (
	pfxSubs       = kv.ShareSubscribers
	pfxPerson     = kv.SharePerson
	pfxGroup      = kv.ShareGroup
	pfxInvite     = kv.ShareInvite
	pfxRootInvite = kv.ShareRootInvite
)

// The channels a subscription names (spec 4.7's values seen). A share is
// reached over every front end whatever the channel; the channel decides
// where it is shown: ChannelWebDAV mounts it as a folder under /webdav/.
const (
	ChannelWeb      = "web"
	ChannelWebDAV   = "webdav"
	ChannelMachines = "machines"
	ChannelFuture   = "future"
)

// The roles a subscription names (the spec shows COLLABORATOR only; the
// others are berth's, written in docs/api.md). A person reached by more
// than one entry (directly and through groups) gets the union.
const (
	// RoleViewer sees and reads the share's items.
	RoleViewer = "VIEWER"
	// RoleCollaborator also creates, changes and deletes them.
	RoleCollaborator = "COLLABORATOR"
	// RoleManager also shares them onward.
	RoleManager = "MANAGER"
)

// RolePerms is what role grants; an unknown role grants nothing.
func RolePerms(role string) Perm {
	switch role {
	case RoleViewer:
		return View | Read
	case RoleCollaborator:
		return View | Read | Write | Delete
	case RoleManager:
		return Owner
	}
	return 0
}

// Entry is one [id, channel, role] triple of spec 4.7: a person or a
// group, by the list it is in.
type Entry struct {
	ID      uint64 `cbor:"1,keyasint"`
	Channel string `cbor:"2,keyasint"`
	Role    string `cbor:"3,keyasint"`
}

// External subscriber states (spec 3).
const (
	ExternalInvited  = "invited"
	ExternalAccepted = "accepted"
)

// Subscribers are a share's subscribers.
type Subscribers struct {
	Persons []Entry
	Groups  []Entry
	// External maps a lower-case e-mail address to its state.
	External map[string]string
}

// Invitation is what the caller sends an external subscriber: berth
// sends no mail itself. The token is shown once; AcceptInvitation takes it.
type Invitation struct {
	RootID uint64
	Email  string
	Token  string
}

type subsRec struct {
	Persons  []Entry           `cbor:"1,keyasint"`
	Groups   []Entry           `cbor:"2,keyasint"`
	External map[string]string `cbor:"3,keyasint"`
}

type inviteRec struct {
	RootID uint64 `cbor:"1,keyasint"`
	Email  string `cbor:"2,keyasint"`
	// Expires is when the invitation stops being accepted. Zero in
	// invitations stored before they expired, until DateInvitations
	// gives them a lifetime from then: they count as live meanwhile, as
	// they were when stored (an upgrade does not end them).
	Expires time.Time `cbor:"3,keyasint,omitempty"`
}

// DefaultInvitationTTL is how long an invitation can be accepted unless
// Options.InvitationTTL says otherwise: a week, as invitations by mail
// commonly last.
const DefaultInvitationTTL = 7 * 24 * time.Hour

// invitationKept is how long an expired invitation stays stored, so that
// its token is answered ErrInvitationExpired, which tells its holder to
// ask for a new one, rather than ErrNotFound; the store's TTL then drops
// it, without a sweeper.
const invitationKept = 30 * 24 * time.Hour

// ErrInvitationExpired: the invitation's lifetime (Options.InvitationTTL)
// is over. The share's administrator sends a new one by a subscribers
// update that keeps the address.
var ErrInvitationExpired = errors.New("share: the invitation has expired")

func (s *Service) store() kv.Store { return s.accounts.Store() }

// CreateOrgShare creates share root name owned by organization orgID,
// which c must manage (OrgManage).
//
// Errors: ErrNotFound, ErrForbidden, vfs's errors of a bad name.
func (s *Service) CreateOrgShare(ctx context.Context, c account.Caller, orgID uint64, name string) (vfs.Root, error) {
	if _, err := s.Organization(ctx, c, orgID, OrgManage); err != nil {
		return vfs.Root{}, err
	}
	if strings.TrimSpace(name) == "" {
		return vfs.Root{}, &account.FieldError{Field: "name", Reason: "required"}
	}
	return s.NewRoot(ctx, account.Person{OrganizationID: orgID}, name, vfs.RootShare)
}

// OrgShares returns one page of organization orgID's own shares (not
// those of organizations below it), live and deleted alike being left to
// the caller: a deleted one is left out. c must manage orgID.
func (s *Service) OrgShares(ctx context.Context, c account.Caller, orgID uint64, offset, limit int) ([]vfs.Root, int, error) {
	if _, err := s.Organization(ctx, c, orgID, OrgManage); err != nil {
		return nil, 0, err
	}
	owners, _, err := s.accounts.OrganizationRoots(ctx, orgID, 0, 1<<31-1)
	if err != nil {
		return nil, 0, err
	}
	var all []vfs.Root
	for _, o := range owners {
		if o.PersonID != 0 || o.Type != string(vfs.RootShare) {
			continue
		}
		r, err := s.fs.Root(ctx, o.RootID)
		if errors.Is(err, vfs.ErrRootDeleted) || errors.Is(err, vfs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		all = append(all, r)
	}
	total := len(all)
	if offset > total {
		offset = total
	}
	end := min(total, offset+limit)
	return all[offset:end], total, nil
}

// OrgShare returns share rootID of organization orgID, which c must
// manage. A root that is not one of orgID's shares is ErrNoRoot.
// Errors: ErrNotFound, ErrForbidden, ErrNoRoot, vfs.ErrRootDeleted.
func (s *Service) OrgShare(ctx context.Context, c account.Caller, orgID, rootID uint64) (vfs.Root, error) {
	if _, err := s.Organization(ctx, c, orgID, OrgManage); err != nil {
		return vfs.Root{}, err
	}
	o, err := s.accounts.RootOwnerOf(ctx, rootID)
	if errors.Is(err, account.ErrNotFound) || (err == nil && (o.PersonID != 0 || o.OrganizationID != orgID || o.Type != string(vfs.RootShare))) {
		return vfs.Root{}, ErrNoRoot
	}
	if err != nil {
		return vfs.Root{}, err
	}
	r, err := s.fs.Root(ctx, rootID)
	if errors.Is(err, vfs.ErrNotExist) {
		return vfs.Root{}, ErrNoRoot
	}
	return r, err
}

// RenameOrgShare renames share rootID of orgID.
func (s *Service) RenameOrgShare(ctx context.Context, c account.Caller, orgID, rootID uint64, name string) (vfs.Root, error) {
	if _, err := s.OrgShare(ctx, c, orgID, rootID); err != nil {
		return vfs.Root{}, err
	}
	if strings.TrimSpace(name) == "" {
		return vfs.Root{}, &account.FieldError{Field: "name", Reason: "required"}
	}
	return s.fs.RenameRoot(ctx, rootID, name)
}

// DeleteOrgShare deletes share rootID of orgID: its subscribers keep
// their subscriptions, so its files answer them root_deleted (spec 7)
// rather than not found.
func (s *Service) DeleteOrgShare(ctx context.Context, c account.Caller, orgID, rootID uint64) error {
	if _, err := s.OrgShare(ctx, c, orgID, rootID); err != nil {
		return err
	}
	return s.fs.DeleteRoot(ctx, rootID)
}

// Subscribers returns share rootID's subscribers (empty lists, not nil).
func (s *Service) Subscribers(ctx context.Context, rootID uint64) (Subscribers, error) {
	var rec subsRec
	err := s.store().View(ctx, func(tx kv.Txn) error {
		var err error
		rec, err = getSubs(tx, rootID)
		return err
	})
	out := Subscribers(rec)
	if out.Persons == nil {
		out.Persons = []Entry{}
	}
	if out.Groups == nil {
		out.Groups = []Entry{}
	}
	if out.External == nil {
		out.External = map[string]string{}
	}
	return out, err
}

// FromGroup returns the triples of the persons a share reaches through its
// group subscribers, not directly: each with the channel and role of the
// group entry that reaches them, persons in id order. The triples are
// gathered in one slice, sorted and compacted: a group subscriber may
// reach every person of a big organization, and a set of triples (a map
// keyed by two strings each) cost several times the answer.
func (s *Service) FromGroup(ctx context.Context, subs Subscribers) ([]Entry, error) {
	direct := make(map[uint64]bool, len(subs.Persons))
	for _, p := range subs.Persons {
		direct[p.ID] = true
	}
	out := []Entry{}
	for _, g := range subs.Groups {
		m, err := s.accounts.Members(ctx, g.ID, true)
		if errors.Is(err, account.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = slices.Grow(out, len(m.Persons)+len(m.PersonsFromGroups))
		for _, ids := range [][]uint64{m.Persons, m.PersonsFromGroups} {
			for _, id := range ids {
				if !direct[id] {
					out = append(out, Entry{ID: id, Channel: g.Channel, Role: g.Role})
				}
			}
		}
	}
	slices.SortFunc(out, compareSub)
	return slices.Compact(out), nil
}

// compareSub orders triples by person, then channel, then role.
func compareSub(a, b Entry) int {
	if c := cmp.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	if c := strings.Compare(a.Channel, b.Channel); c != 0 {
		return c
	}
	return strings.Compare(a.Role, b.Role)
}

// SetSubscribers replaces share rootID's subscribers with subs, which c
// must manage (as OrgShare). Persons and groups must belong to orgID or an
// organization below it. An e-mail address new to External is invited (its
// state is set to invited whatever was asked); one already there keeps
// its state, and one still invited whose invitation expired is invited
// again, with a new token; one left out is dropped with its invitation.
// The returned invitations are for the caller to send.
//
// Errors: those of OrgShare; an account.FieldError naming the bad entry,
// or external_subscribers when the invitations would pass what the
// top-level organization may send this hour (Options.MailPerHour).
func (s *Service) SetSubscribers(ctx context.Context, c account.Caller, orgID, rootID uint64, subs Subscribers) ([]Invitation, error) {
	if _, err := s.OrgShare(ctx, c, orgID, rootID); err != nil {
		return nil, err
	}
	if err := s.checkSubscribers(ctx, orgID, &subs); err != nil {
		return nil, err
	}
	// Invitations are counted against the top-level organization's
	// mail budget, so that making child organizations gains nothing.
	chain, err := s.accounts.Chain(ctx, orgID)
	if err != nil {
		return nil, err
	}
	sender := orgSender(chain[len(chain)-1])
	var invites []Invitation
	taken := 0
	err = s.store().Update(ctx, func(tx kv.Txn) error {
		invites = nil
		s.mail.GiveBack(sender, taken) // a try run again
		taken = 0
		old, err := getSubs(tx, rootID)
		if err != nil {
			return err
		}
		for _, p := range old.Persons {
			if err := tx.Delete(kv.Key(pfxPerson, p.ID, rootID)); err != nil {
				return err
			}
		}
		for _, g := range old.Groups {
			if err := tx.Delete(kv.Key(pfxGroup, g.ID, rootID)); err != nil {
				return err
			}
		}
		rec := subsRec{Persons: subs.Persons, Groups: subs.Groups, External: map[string]string{}}
		for _, p := range rec.Persons {
			if err := tx.Set(kv.Key(pfxPerson, p.ID, rootID), nil); err != nil {
				return err
			}
		}
		for _, g := range rec.Groups {
			if err := tx.Set(kv.Key(pfxGroup, g.ID, rootID), nil); err != nil {
				return err
			}
		}
		now := s.now()
		// The share's invitations are found through its own index
		// (each entry and invitation dropped by the store's TTL after
		// invitationKept). A dropped address's token must stop working,
		// and an expired one is replaced below. Before the index this
		// read every invitation of every share on the server, in the
		// transaction, so each update cost all tenants' invitations
		// and conflicted with their every change of one.
		live := map[string]bool{}
		var ends [][]byte
		prefix := kv.Key(pfxRootInvite, rootID)
		if err := tx.Scan(prefix, nil, func(k, _ []byte) error {
			ik := kv.KeyString(pfxInvite, nil, string(k[len(prefix):]))
			v, err := tx.Get(ik)
			if errors.Is(err, kv.ErrNotFound) {
				ends = append(ends, slices.Clone(k)) // the invitation expired
				return nil
			}
			if err != nil {
				return err
			}
			var in inviteRec
			if err := cbor.Unmarshal(v, &in); err != nil {
				return err
			}
			if _, keep := subs.External[in.Email]; keep && in.RootID == rootID && (in.Expires.IsZero() || now.Before(in.Expires)) {
				live[in.Email] = true
				return nil
			}
			ends = append(ends, slices.Clone(k), ik)
			return nil
		}); err != nil {
			return err
		}
		for _, k := range ends {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		for email := range subs.External {
			st, ok := old.External[email]
			if ok && (st != ExternalInvited || live[email]) {
				rec.External[email] = st
				continue
			}
			tok := newToken()
			b, err := cbor.Marshal(inviteRec{RootID: rootID, Email: email, Expires: now.Add(s.inviteTTL)})
			if err != nil {
				return err
			}
			if err := tx.SetTTL(inviteKey(tok), b, s.inviteTTL+invitationKept); err != nil {
				return err
			}
			if err := tx.SetTTL(rootInviteKey(rootID, tok), nil, s.inviteTTL+invitationKept); err != nil {
				return err
			}
			rec.External[email] = ExternalInvited
			invites = append(invites, Invitation{RootID: rootID, Email: email, Token: tok})
		}
		if ok, left, _ := s.mail.Use(sender, len(invites)); !ok {
			return &account.FieldError{Field: "external_subscribers", Reason: fmt.Sprintf(
				"%d new addresses to invite, but the organization may send %d more invitations this hour (at most %d an hour)", len(invites), max(left, 0), s.mail.Max())}
		}
		taken = len(invites)
		b, err := cbor.Marshal(rec)
		if err != nil {
			return err
		}
		if err := tx.Set(kv.Key(pfxSubs, rootID), b); err != nil {
			return err
		}
		if s.accounts == nil {
			return nil
		}
		return s.accounts.Record(ctx, tx, account.Change{
			Activity:    account.ActShareSubscribersUpdated,
			OnType:      "root",
			OnText:      fmt.Sprintf("share %d", rootID),
			OnCompanyID: orgID,
			OnRootID:    rootID,
		})
	})
	if err != nil {
		s.mail.GiveBack(sender, taken)
		return nil, err
	}
	return invites, nil
}

// checkSubscribers validates and normalizes subs: channels and roles
// known, persons and groups in orgID's subtree, addresses lower case.
func (s *Service) checkSubscribers(ctx context.Context, orgID uint64, subs *Subscribers) error {
	check := func(field string, t Entry) error {
		switch t.Channel {
		case ChannelWeb, ChannelWebDAV, ChannelMachines, ChannelFuture:
		default:
			return &account.FieldError{Field: field, Reason: "channel must be web, webdav, machines or future"}
		}
		if RolePerms(t.Role) == 0 {
			return &account.FieldError{Field: field, Reason: "role must be VIEWER, COLLABORATOR or MANAGER"}
		}
		return nil
	}
	within := func(org uint64) (bool, error) {
		place, err := s.accounts.OrgPlaceOf(ctx, org)
		if errors.Is(err, account.ErrNotFound) {
			return false, nil
		}
		return err == nil && account.Within(place.Chain, orgID), err
	}
	for _, t := range subs.Persons {
		if err := check("subscribers", t); err != nil {
			return err
		}
		p, err := s.accounts.Person(ctx, t.ID)
		ok := err == nil
		if err != nil && !errors.Is(err, account.ErrNotFound) {
			return err
		}
		if ok {
			if ok, err = within(p.OrganizationID); err != nil {
				return err
			}
		}
		if !ok {
			return &account.FieldError{Field: "subscribers", Reason: "no person " + itoa(t.ID) + " in the share's organization"}
		}
	}
	for _, t := range subs.Groups {
		if err := check("group_subscribers", t); err != nil {
			return err
		}
		g, err := s.accounts.Group(ctx, t.ID)
		ok := err == nil
		if err != nil && !errors.Is(err, account.ErrNotFound) {
			return err
		}
		if ok {
			if ok, err = within(g.OrganizationID); err != nil {
				return err
			}
		}
		if !ok {
			return &account.FieldError{Field: "group_subscribers", Reason: "no group " + itoa(t.ID) + " in the share's organization"}
		}
	}
	ext := map[string]string{}
	for e, st := range subs.External {
		e = strings.ToLower(strings.TrimSpace(e))
		at := strings.IndexByte(e, '@')
		if at <= 0 || at == len(e)-1 || strings.ContainsAny(e, " \t\r\n,;<>") {
			return &account.FieldError{Field: "external_subscribers", Reason: "not an e-mail address: " + e}
		}
		ext[e] = st
	}
	subs.External = ext
	return nil
}

// AcceptInvitation marks the invitation of token accepted and returns the
// share and address it was for. Errors: ErrNotFound for an unknown token
// (or one whose address was dropped or invited again since),
// ErrInvitationExpired once its lifetime (Options.InvitationTTL) is over.
func (s *Service) AcceptInvitation(ctx context.Context, token string) (Invitation, error) {
	var in inviteRec
	err := s.store().Update(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(inviteKey(token))
		if errors.Is(err, kv.ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := cbor.Unmarshal(v, &in); err != nil {
			return err
		}
		if !in.Expires.IsZero() && !s.now().Before(in.Expires) {
			return ErrInvitationExpired
		}
		rec, err := getSubs(tx, in.RootID)
		if err != nil {
			return err
		}
		if _, ok := rec.External[in.Email]; !ok {
			return ErrNotFound
		}
		rec.External[in.Email] = ExternalAccepted
		b, err := cbor.Marshal(rec)
		if err != nil {
			return err
		}
		return tx.Set(kv.Key(pfxSubs, in.RootID), b)
	})
	return Invitation{RootID: in.RootID, Email: in.Email}, err
}

// subscription is what c's entries on share rootID grant: the union of
// the roles of c's direct entries and of the groups c is in, and whether
// one of them names the webdav channel.
func (s *Service) subscription(ctx context.Context, c account.Caller, rootID uint64) (Perm, bool, error) {
	g, err := s.grantsOf(ctx, rootID)
	if err != nil {
		return 0, false, err
	}
	perms, dav := Perm(0), false
	if i, ok := slices.BinarySearchFunc(g.persons, c.Person.ID, grantFor); ok {
		perms, dav = g.persons[i].perms, g.persons[i].dav
	}
	if len(g.groups) > 0 {
		groups, err := s.accounts.PersonGroups(ctx, c.Person.ID)
		if err != nil {
			return 0, false, err
		}
		for _, e := range g.groups {
			if _, in := slices.BinarySearch(groups, e.id); !in {
				continue
			}
			if e.unread {
				// Its state did not read with the grants: judged for
				// its members alone, as each request did before.
				active, err := s.groupActive(ctx, e.id)
				if err != nil {
					return 0, false, err
				}
				if !active {
					continue
				}
			}
			perms |= e.perms
			dav = dav || e.dav
		}
	}
	return perms, dav, nil
}

// maxCachedGrants bounds the shares whose grants are kept, and
// maxKeptSubscribers the subscriber entries of a share whose grants are:
// an entry is 16 bytes a subscriber, so a full cache holds 32 MiB at
// most. A share of more (nothing bounds them: a share with 100,000
// subscribers kept 1.6 MB, and 1,024 of them 1.6 GB) is decoded at each
// request, as every share was before grants were kept.
const (
	maxCachedGrants    = 1024
	maxKeptSubscribers = 2048
)

// grants are what a share's subscriber entries grant, each list sorted
// by id with one grant an id (the union of its entries'). Groups that
// reach nobody (groupActive) are left out.
type grants struct {
	persons, groups []grant
}

type grant struct {
	id    uint64
	perms Perm
	dav   bool
	// unread: a group whose state did not read when the grants were
	// made (a damaged record), judged again for its members' requests.
	unread bool
}

func grantFor(g grant, id uint64) int { return cmp.Compare(g.id, id) }

// grantsOf returns share rootID's grants, decoded from its subscribers
// record once until the store's next commit outside file content
// (kv.MetaGeneration; the record is share's, not content), and shared:
// nothing may change them. Every request into a share decoded the whole
// record, a cost that followed the number of subscribers (2,000: 145 KB
// and 4,000 allocations a request).
func (s *Service) grantsOf(ctx context.Context, rootID uint64) (*grants, error) {
	gen := kv.MetaGeneration(s.store())
	if g, ok := s.grants.Get(gen, rootID); ok {
		return g, nil
	}
	var rec subsRec
	if err := s.store().View(ctx, func(tx kv.Txn) error {
		var err error
		rec, err = getSubs(tx, rootID)
		return err
	}); err != nil {
		return nil, err
	}
	g := &grants{persons: grantList(rec.Persons), groups: grantList(rec.Groups)}
	// A group's state is account's record, outside file content too: a
	// group disabled or deleted moves the generation the entry is kept by.
	// A group whose state does not read is kept, to be judged for its
	// members' requests alone: taken for an error of the grants, it
	// failed every subscriber's request into the share (and a tus
	// upload's check of them, which then answered 500).
	active := g.groups[:0]
	for _, e := range g.groups {
		ok, err := s.groupActive(ctx, e.id)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			e.unread, ok = true, true
		}
		if ok {
			active = append(active, e)
		}
	}
	g.groups = active
	if len(rec.Persons)+len(rec.Groups) <= maxKeptSubscribers {
		s.grants.Put(gen, rootID, g)
	}
	return g, nil
}

// grantList merges entries into one grant an id, sorted by id.
func grantList(entries []Entry) []grant {
	out := make([]grant, 0, len(entries))
	for _, e := range entries {
		out = append(out, grant{id: e.ID, perms: RolePerms(e.Role), dav: e.Channel == ChannelWebDAV})
	}
	slices.SortFunc(out, func(a, b grant) int { return cmp.Compare(a.id, b.id) })
	merged := out[:0]
	for _, g := range out {
		if n := len(merged); n > 0 && merged[n-1].id == g.id {
			merged[n-1].perms |= g.perms
			merged[n-1].dav = merged[n-1].dav || g.dav
			continue
		}
		merged = append(merged, g)
	}
	return slices.Clip(merged)
}

// groupActive: a disabled group reaches nobody, nor does one that is
// gone. A group that could not be read is an error, not "no access": taken for none, it made a failed
// read end the uploads of every member whose access came through it
// (rest.TusHolder), where the request only failed.
func (s *Service) groupActive(ctx context.Context, id uint64) (bool, error) {
	g, err := s.accounts.Group(ctx, id)
	if errors.Is(err, account.ErrNotFound) {
		return false, nil
	}
	return err == nil && g.Active, err
}

// subscribedRoots returns the ids of the shares c subscribes to, directly
// or through a group, in id order. They are kept until the store's next
// commit outside file content (kv.MetaGeneration): subscriptions and
// memberships are share's and account's records, and a cache that every
// file write emptied walked a person's groups again (a scan each) at
// their next request on a busy server.
func (s *Service) subscribedRoots(ctx context.Context, c account.Caller) ([]uint64, error) {
	gen := kv.MetaGeneration(s.store())
	if ids, ok := s.subscriptions.Get(gen, c.Person.ID); ok {
		return ids, nil
	}
	groups, err := s.accounts.PersonGroups(ctx, c.Person.ID)
	if err != nil {
		return nil, err
	}
	var ids []uint64
	err = s.store().View(ctx, func(tx kv.Txn) error {
		ids = nil
		scan := func(prefix []byte) error {
			return tx.Scan(prefix, nil, func(k, _ []byte) error {
				ids = append(ids, kv.Uint64At(k, len(prefix)))
				return nil
			})
		}
		if err := scan(kv.Key(pfxPerson, c.Person.ID)); err != nil {
			return err
		}
		for _, g := range groups {
			if err := scan(kv.Key(pfxGroup, g)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	s.subscriptions.Put(gen, c.Person.ID, ids)
	return ids, nil
}

// shareAccess is c's access to share root place p: the organization's
// administrators (and those above) hold every permission; a subscriber
// what their entries grant; anyone else ErrNoRoot. The policy (tightened
// by the ancestors', account.RootPlace.Policy) and the quotas are the
// owning organization's, the principal c's.
func (s *Service) shareAccess(ctx context.Context, c account.Caller, p account.RootPlace) (Perm, bool, vfs.WriteOptions, error) {
	perms, dav, err := s.subscription(ctx, c, p.Owner.RootID)
	if err != nil {
		return 0, false, vfs.WriteOptions{}, err
	}
	if c.Person.Admin && !c.Person.Guest && account.Within(p.Chain, c.Person.OrganizationID) {
		perms = Owner
	}
	if perms == 0 {
		return 0, false, vfs.WriteOptions{}, ErrNoRoot
	}
	pol := p.Policy
	o := vfs.WriteOptions{
		Principal:          c.Person.Principal(),
		Actor:              c.Actor(),
		MaxFileSize:        pol.MaxFileSize,
		ExcludedExtensions: pol.ExcludedExtensionList(),
	}
	for i, id := range p.Chain {
		if q := p.SpaceQuotas[i]; q > 0 {
			o.Quotas = append(o.Quotas, vfs.Quota{Tally: account.TallyOrg(id, ""), Bytes: q, Shared: true})
		}
	}
	return perms, dav, o, nil
}

func getSubs(tx kv.Txn, rootID uint64) (subsRec, error) {
	var rec subsRec
	v, err := tx.Get(kv.Key(pfxSubs, rootID))
	if errors.Is(err, kv.ErrNotFound) {
		return rec, nil
	}
	if err != nil {
		return rec, err
	}
	return rec, cbor.Unmarshal(v, &rec)
}

func newToken() string {
	var b [24]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// datedBatch bounds the invitations one transaction of DateInvitations
// dates.
const datedBatch = 1000

// DateInvitations gives each invitation stored before invitations
// expired (no Expires, no TTL in the store) the lifetime a new one gets,
// counted from now (Options.InvitationTTL, then invitationKept in the
// store), enters each stored before its share's index of invitations
// (shrrootinv/) existed in that index, and returns how many it changed.
// The daemon runs it once at start: without it such an invitation would
// count as expired the moment berth was upgraded, one never accepted
// would stay stored forever, and one out of the index would not be
// revoked when its address is dropped.
func (s *Service) DateInvitations(ctx context.Context) (int, error) {
	dated := 0
	for {
		n := 0
		err := s.store().Update(ctx, func(tx kv.Txn) error {
			n = 0
			now := s.now()
			type old struct {
				key, index []byte
				rec        inviteRec
				undated    bool
			}
			var found []old
			if err := tx.Scan([]byte(pfxInvite), nil, func(k, v []byte) error {
				var in inviteRec
				if err := cbor.Unmarshal(v, &in); err != nil {
					return err
				}
				index := kv.KeyString(pfxRootInvite, []uint64{in.RootID}, string(k[len(pfxInvite):]))
				_, err := tx.Get(index)
				if err != nil && !errors.Is(err, kv.ErrNotFound) {
					return err
				}
				if in.Expires.IsZero() || err != nil {
					found = append(found, old{slices.Clone(k), index, in, in.Expires.IsZero()})
					if len(found) == datedBatch {
						return kv.ErrStop
					}
				}
				return nil
			}); err != nil {
				return err
			}
			for _, o := range found {
				ttl := s.inviteTTL + invitationKept
				if o.undated {
					o.rec.Expires = now.Add(s.inviteTTL)
					b, err := cbor.Marshal(o.rec)
					if err != nil {
						return err
					}
					if err := tx.SetTTL(o.key, b, ttl); err != nil {
						return err
					}
				} else {
					// Kept while the invitation may be: an entry left
					// after it is dropped by the next update.
					ttl = o.rec.Expires.Sub(now) + invitationKept
				}
				if err := tx.SetTTL(o.index, nil, max(ttl, time.Second)); err != nil {
					return err
				}
			}
			n = len(found)
			return nil
		})
		dated += n
		if err != nil || n < datedBatch {
			return dated, err
		}
	}
}

func inviteKey(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return kv.KeyString(pfxInvite, nil, string(h[:]))
}

// rootInviteKey is share root's index entry of the invitation of token.
func rootInviteKey(root uint64, token string) []byte {
	h := sha256.Sum256([]byte(token))
	return kv.KeyString(pfxRootInvite, []uint64{root}, string(h[:]))
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
