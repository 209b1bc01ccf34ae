package account

import (
	"context"
	"strconv"
	"time"

	"berth/kv"
)

// Actor is who makes a change, as the activity log records it (spec 2.15
// actor_*). Front ends put the caller's into the request's context
// (WithActor) and into vfs.WriteOptions.Actor; a change made with none is
// the system's (background jobs, the command line on a stopped store).
type Actor struct {
	// Type is "person", "guest", "machine", "system", or "sharelink"
	// for someone not signed in who writes through a share link
	// (share.LinkVisitor).
	Type string
	// Text describes the actor for people: a display name and login.
	Text      string
	CompanyID uint64
	PersonID  uint64 // the person, or the guest's id for a guest
	MachineID uint64 // the machine the session was signed in from, if any
}

// System is the actor of changes nobody asked for over the API.
var System = Actor{Type: "system", Text: "berth"}

// Actor is c as the actor of the changes it makes.
func (c Caller) Actor() Actor {
	typ := "person"
	if c.Person.Guest {
		typ = "guest"
	}
	return Actor{
		Type:      typ,
		Text:      personText(c.Person),
		CompanyID: c.Person.OrganizationID,
		PersonID:  c.Person.ID,
		MachineID: c.MachineID,
	}
}

func personText(p Person) string {
	if p.DisplayName != "" && p.DisplayName != p.Username {
		return p.DisplayName + " (" + p.Username + ")"
	}
	if p.Username != "" {
		return p.Username
	}
	return "person " + strconv.FormatUint(p.ID, 10)
}

type actorKey struct{}

// WithActor returns ctx carrying a as the actor of the account changes
// made under it.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor ctx carries, or System.
func ActorFrom(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok {
		return a
	}
	return System
}

// Activity names of the account changes, as the activity log's types
// know them. The log (package activity) maps each to its activity type.
const (
	ActOrganizationCreated  = "organization_created"
	ActOrganizationUpdated  = "organization_updated"
	ActOrganizationDisabled = "organization_disabled"
	ActOrganizationEnabled  = "organization_enabled"
	ActOrganizationDeleted  = "organization_deleted"
	ActPolicyUpdated        = "policy_updated"
	ActPersonCreated        = "person_created"
	ActPersonUpdated        = "person_updated"
	ActPersonDeleted        = "person_deleted"
	ActPasswordChanged      = "password_changed"
	ActPasswordReset        = "password_reset"
	ActPersonUnlocked       = "person_unlocked"
	ActGuestCreated         = "guest_created"
	ActGuestUpdated         = "guest_updated"
	ActGuestDeleted         = "guest_deleted"
	ActGuestConverted       = "guest_converted"
	ActGroupCreated         = "group_created"
	ActGroupUpdated         = "group_updated"
	ActGroupDeleted         = "group_deleted"
	ActGroupMembersUpdated  = "group_members_updated"
	ActRootCreated          = "root_created"
	ActLogin                = "login"
	ActLoginFailed          = "login_failed"
	ActAccountLocked        = "account_locked"
	// Sharing (package share records these through Service.Record).
	ActShareLinkCreated        = "sharelink_created"
	ActShareLinkUpdated        = "sharelink_updated"
	ActShareLinkDeleted        = "sharelink_deleted"
	ActShareSubscribersUpdated = "share_subscribers_updated"
	// Device passwords and machines (devicepw.go).
	ActDevicePasswordCreated = "device_password_created"
	ActDevicePasswordRevoked = "device_password_revoked"
	ActMachineDeleted        = "machine_deleted"
	// Machines' file servers, mappings and backups (machinemap.go).
	ActMachineServerChanged  = "machine_server_changed"
	ActMachineMappingCreated = "machine_mapping_created"
	ActMachineMappingDeleted = "machine_mapping_deleted"
	ActBackupCreated         = "backup_created"
	ActBackupRestored        = "backup_restored"
	ActBackupDeleted         = "backup_deleted"
	// Directory servers (authsource.go).
	ActAuthSourceCreated  = "auth_source_created"
	ActAuthSourceUpdated  = "auth_source_updated"
	ActAuthSourceDeleted  = "auth_source_deleted"
	ActAuthSourceImported = "auth_source_imported"
)

// Change is one account change as the activity log records it: written
// by the Journal in the transaction that makes the change, so that an
// acknowledged change always has its record, after a crash too.
type Change struct {
	Activity string // one of the Act names
	Actor    Actor
	Time     time.Time

	// What was acted on (spec 2.15 acted_on_*): OnType is
	// "organization", "person", "guest", "group", "machine" or "root".
	OnType      string
	OnText      string
	OnCompanyID uint64
	OnGroupID   uint64
	OnGuestID   uint64
	OnMachineID uint64
	OnPersonID  uint64
	OnRootID    uint64

	// Action is the spec's action_text (more about the action, or "");
	// Data its data_text (what was changed, or "").
	Action string
	Data   string
}

// Journal records account changes inside their transactions. The daemon
// wires the activity log to it; account does not know the log.
type Journal interface {
	Record(tx kv.Txn, c Change) error
}

// record hands c to the journal, with the actor of ctx and the time now
// when c has none. Without a journal it does nothing.
func (s *Service) record(ctx context.Context, tx kv.Txn, c Change) error {
	if s.opts.Journal == nil {
		return nil
	}
	if c.Actor.Type == "" {
		c.Actor = ActorFrom(ctx)
	}
	if c.Time.IsZero() {
		c.Time = s.now()
	}
	return s.opts.Journal.Record(tx, c)
}

// Record hands c to the journal inside tx, as the Service's own changes
// are: for the domains above account (share) whose changes belong in the
// same log. The actor is ctx's when c names none.
func (s *Service) Record(ctx context.Context, tx kv.Txn, c Change) error {
	return s.record(ctx, tx, c)
}

// personChange is a Change acting on person p.
func personChange(activity string, p Person) Change {
	c := Change{Activity: activity, OnType: "person", OnText: personText(p), OnCompanyID: p.OrganizationID, OnPersonID: p.ID}
	if p.Guest {
		c.OnType, c.OnPersonID, c.OnGuestID = "guest", 0, p.ID
	}
	return c
}

// orgChange is a Change acting on organization o.
func orgChange(activity string, o Organization) Change {
	return Change{Activity: activity, OnType: "organization", OnText: o.Name, OnCompanyID: o.ID}
}
