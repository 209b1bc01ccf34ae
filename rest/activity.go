package rest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"berth/account"
	"berth/activity"
	"berth/share"
	"berth/vfs"
)

// activityRoutes registers the activity routes of spec 4.12 and the
// activity lists of organizations (4.6) and persons (4.8).
func (s *server) activityRoutes() {
	s.handle("GET /api/2/activity/types", s.authed(s.activityTypes))
	s.handle("GET /api/2/activity/{activity_id}", s.authed(s.getActivity))
	s.handle("POST /api/2/activity/create", s.authed(s.createActivity))
	s.handle("GET /api/2/organization/{organization_id}/activity", s.authed(s.organizationActivity))
	s.handle("GET /api/2/person/{person_id}/activity", s.authed(s.personActivity))
}

// activityBody is the activity object of spec 2.15, exactly these fields;
// an id of none is null, as is an empty action_text or data_text.
type activityBody struct {
	ID               uint64  `json:"id"`
	ActorType        string  `json:"actor_type"`
	ActorText        string  `json:"actor_text"`
	ActorCompanyID   *uint64 `json:"actor_company_id"`
	ActorGuestID     *uint64 `json:"actor_guest_id"`
	ActorMachineID   *uint64 `json:"actor_machine_id"`
	ActorPersonID    *uint64 `json:"actor_person_id"`
	ActedOnType      string  `json:"acted_on_type"`
	ActedOnText      string  `json:"acted_on_text"`
	ActedOnCompanyID *uint64 `json:"acted_on_company_id"`
	ActedOnGroupID   *uint64 `json:"acted_on_group_id"`
	ActedOnGuestID   *uint64 `json:"acted_on_guest_id"`
	ActedOnMachineID *uint64 `json:"acted_on_machine_id"`
	ActedOnPersonID  *uint64 `json:"acted_on_person_id"`
	ActedOnRootID    *uint64 `json:"acted_on_root_id"`
	ActionText       *string `json:"action_text"`
	DataText         *string `json:"data_text"`
	ActivityTypeID   uint64  `json:"activity_type_id"`
	Created          string  `json:"created"`
	Processed        bool    `json:"processed"`
	Type             string  `json:"type"`
}

// activityTypeBody is the activity_type object of spec 2.16.
type activityTypeBody struct {
	ID           uint64 `json:"id"`
	Activity     string `json:"activity"`
	MachineScope bool   `json:"machine_scope"`
	UserScope    bool   `json:"user_scope"`
	SystemScope  bool   `json:"system_scope"`
	Type         string `json:"type"`
}

func idOrNull(id uint64) *uint64 {
	if id == 0 {
		return nil
	}
	return &id
}

func textOrNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func encodeActivity(r activity.Record) activityBody {
	return activityBody{
		ID:               r.ID,
		ActorType:        r.ActorType,
		ActorText:        r.ActorText,
		ActorCompanyID:   idOrNull(r.ActorCompanyID),
		ActorGuestID:     idOrNull(r.ActorGuestID),
		ActorMachineID:   idOrNull(r.ActorMachineID),
		ActorPersonID:    idOrNull(r.ActorPersonID),
		ActedOnType:      r.ActedOnType,
		ActedOnText:      r.ActedOnText,
		ActedOnCompanyID: idOrNull(r.ActedOnCompanyID),
		ActedOnGroupID:   idOrNull(r.ActedOnGroupID),
		ActedOnGuestID:   idOrNull(r.ActedOnGuestID),
		ActedOnMachineID: idOrNull(r.ActedOnMachineID),
		ActedOnPersonID:  idOrNull(r.ActedOnPersonID),
		ActedOnRootID:    idOrNull(r.ActedOnRootID),
		ActionText:       textOrNull(r.ActionText),
		DataText:         textOrNull(r.DataText),
		ActivityTypeID:   r.ActivityTypeID,
		Created:          formatDateTime(r.Created),
		Processed:        r.Processed,
		Type:             "activity",
	}
}

func encodeActivities(recs []activity.Record) []activityBody {
	out := make([]activityBody, 0, len(recs))
	for _, r := range recs {
		out = append(out, encodeActivity(r))
	}
	return out
}

// activityTypes answers GET /api/2/activity/types: the fixed table.
func (s *server) activityTypes(r *http.Request) (any, error) {
	var out []activityTypeBody
	for _, t := range activity.Types() {
		out = append(out, activityTypeBody{ID: t.ID, Activity: t.Activity, MachineScope: t.MachineScope,
			UserScope: t.UserScope, SystemScope: t.SystemScope, Type: "activity_type"})
	}
	return map[string]any{"results": out}, nil
}

// pathID reads the integer path value name; anything else names nothing
// (404, as an id that does not exist).
func pathID(r *http.Request, name string) (uint64, error) {
	id, err := strconv.ParseUint(r.PathValue(name), 10, 64)
	if err != nil || id == 0 {
		return 0, ErrNotFound
	}
	return id, nil
}

// getActivity answers GET /api/2/activity/{id}. A record is seen by the
// person or guest who is its actor or was acted on, and by the
// administrators of the actor's or the acted-on organization or of one
// above them. To anyone else it does not exist (404).
func (s *server) getActivity(r *http.Request) (any, error) {
	id, err := pathID(r, "activity_id")
	if err != nil {
		return nil, err
	}
	if s.opts.Activity == nil {
		return nil, share.ErrNotFound
	}
	rec, found, err := s.opts.Activity.Get(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, share.ErrNotFound
	}
	if err := s.seesActivity(r.Context(), callerOf(r), rec); err != nil {
		return nil, err
	}
	recs := []activity.Record{rec}
	if err := s.redact(r.Context(), callerOf(r), recs); err != nil {
		return nil, err
	}
	return encodeActivity(recs[0]), nil
}

// seesActivity returns nil when c may read rec, share.ErrNotFound when not.
func (s *server) seesActivity(ctx context.Context, c caller, rec activity.Record) error {
	me := c.Person.ID
	if me != 0 && (me == rec.ActorPersonID || me == rec.ActorGuestID || me == rec.ActedOnPersonID || me == rec.ActedOnGuestID) {
		return nil
	}
	for _, org := range []uint64{rec.ActorCompanyID, rec.ActedOnCompanyID} {
		if org == 0 {
			continue
		}
		_, err := s.shares.Organization(ctx, c, org, share.OrgManage)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, share.ErrNotFound) || errors.Is(err, share.ErrForbidden):
		default:
			return err
		}
	}
	return share.ErrNotFound
}

// organizationActivity answers GET /api/2/organization/{id}/activity:
// its records, newest first, for those who manage it.
func (s *server) organizationActivity(r *http.Request) (any, error) {
	id, err := pathID(r, "organization_id")
	if err != nil {
		return nil, err
	}
	p, err := pageOf(r)
	if err != nil {
		return nil, err
	}
	if _, err := s.shares.Organization(r.Context(), callerOf(r), id, share.OrgManage); err != nil {
		return nil, err
	}
	before, err := beforeID(r)
	if err != nil {
		return nil, err
	}
	return s.activityPage(r.Context(), callerOf(r), p, func(ctx context.Context) ([]activity.Record, int, error) {
		return s.opts.Activity.OrganizationBefore(ctx, id, before, p.Offset, p.Limit)
	})
}

// personActivity answers GET /api/2/person/{id}/activity: the records of
// a person or guest, as actor or acted on, newest first, for whoever may
// read the person.
func (s *server) personActivity(r *http.Request) (any, error) {
	id, err := pathID(r, "person_id")
	if err != nil {
		return nil, err
	}
	p, err := pageOf(r)
	if err != nil {
		return nil, err
	}
	if _, err := s.shares.Person(r.Context(), callerOf(r), id, share.PersonRead); err != nil {
		return nil, err
	}
	before, err := beforeID(r)
	if err != nil {
		return nil, err
	}
	return s.activityPage(r.Context(), callerOf(r), p, func(ctx context.Context) ([]activity.Record, int, error) {
		return s.opts.Activity.PersonBefore(ctx, id, before, p.Offset, p.Limit)
	})
}

// beforeID reads the activity lists' before_id (berth's; the spec names
// no paging parameters): only the records older than that id, 0 or
// absent all of them. Offsets shift by one with every new record at the
// head of a newest-first list, so a client paging by offset alone reads
// a record twice for each one added meanwhile; paging by the id of the
// last record read does not (docs/api.md "Activity").
func beforeID(r *http.Request) (uint64, error) {
	q := r.URL.Query()
	if !q.Has("before_id") {
		return 0, nil
	}
	n, err := strconv.ParseUint(q.Get("before_id"), 10, 64)
	if err != nil {
		return 0, Describe(ErrInvalidRequest, "before_id must be a whole number, the id of an activity record")
	}
	return n, nil
}

func (s *server) activityPage(ctx context.Context, c caller, p page, list func(context.Context) ([]activity.Record, int, error)) (any, error) {
	if s.opts.Activity == nil {
		return paged(p, []activityBody{}, 0), nil
	}
	recs, total, err := list(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.redact(ctx, c, recs); err != nil {
		return nil, err
	}
	return paged(p, encodeActivities(recs), total), nil
}

// redact takes out of recs, read by c, what c may not see: the actors
// of organizations above theirs (hideActors), the names of files and
// folders in roots c may not browse (hideNames), and the owners of
// those in organizations c does not see (hideOwners).
func (s *server) redact(ctx context.Context, c caller, recs []activity.Record) error {
	sees := s.seesOrganization(ctx, c)
	if err := s.hideActors(ctx, c, recs, sees); err != nil {
		return err
	}
	if err := s.hideNames(ctx, c, recs); err != nil {
		return err
	}
	return hideOwners(c, recs, sees)
}

// seesOrganization answers whether c sees an organization
// (share.OrgRead), asking share once per organization however many
// records name it.
func (s *server) seesOrganization(ctx context.Context, c caller) func(org uint64) (bool, error) {
	seen := map[uint64]bool{}
	return func(org uint64) (bool, error) {
		if v, ok := seen[org]; ok {
			return v, nil
		}
		_, err := s.shares.Organization(ctx, c, org, share.OrgRead)
		switch {
		case err == nil:
			seen[org] = true
		case errors.Is(err, share.ErrNotFound) || errors.Is(err, share.ErrForbidden):
			seen[org] = false
		default:
			return false, err
		}
		return seen[org], nil
	}
}

// hideOwners takes the owner (acted_on_company_id, acted_on_person_id)
// out of the records of files, folders and roots whose owner's
// organization c does not see (share.OrgRead), unless c made the change:
// a share-link subscriber's write is in the lists of the subscriber's
// organization, whose administrators read the ids of another
// organization and its person, who do not exist for them. The root id
// stays: it names nothing c can reach. Runs after hideNames, which
// reads the owner.
func hideOwners(c caller, recs []activity.Record, sees func(org uint64) (bool, error)) error {
	me := c.Person.ID
	for i := range recs {
		r := &recs[i]
		if r.ActedOnType != "file" && r.ActedOnType != "folder" && r.ActedOnType != "root" {
			continue
		}
		org := r.ActedOnCompanyID
		if org == 0 || org == c.Person.OrganizationID || (me != 0 && (me == r.ActorPersonID || me == r.ActorGuestID || me == r.ActedOnPersonID)) {
			continue
		}
		ok, err := sees(org)
		if err != nil {
			return err
		}
		if !ok {
			r.ActedOnCompanyID, r.ActedOnPersonID = 0, 0
		}
	}
	return nil
}

// hideNames replaces, in the records of files and folders, the item's
// name (acted_on_text "a file" or "a folder") and a name in data_text
// (a rename's, move's or copy's; an upload's size stays) for a reader
// who is neither the record's actor nor the root's owner and may not
// browse the root: an administrator whose organization's policy has
// admin_browse_files false reads that a person changed a file, never
// which (docs/api.md "File names in the activity log"). Whether c
// browses a root is share's answer (share.Root), once per root.
func (s *server) hideNames(ctx context.Context, c caller, recs []activity.Record) error {
	browses := map[uint64]bool{}
	write, _ := activity.TypeNamed(string(vfs.OpWrite))
	for i := range recs {
		r := &recs[i]
		if r.ActedOnType != "file" && r.ActedOnType != "folder" {
			continue
		}
		me := c.Person.ID
		if me != 0 && (me == r.ActorPersonID || me == r.ActorGuestID || me == r.ActedOnPersonID) {
			continue
		}
		sees, ok := browses[r.ActedOnRootID]
		if !ok {
			_, err := s.shares.Root(ctx, c, r.ActedOnRootID)
			switch {
			case err == nil:
				sees = true
			case errors.Is(err, share.ErrNoRoot) || errors.Is(err, vfs.ErrRootDeleted) || errors.Is(err, vfs.ErrNotExist):
			default:
				return err
			}
			browses[r.ActedOnRootID] = sees
		}
		if sees {
			continue
		}
		r.ActedOnText = "a " + r.ActedOnType
		if r.ActivityTypeID != write.ID {
			r.DataText = ""
		}
	}
	return nil
}

// hiddenActor is the actor_text of a record whose actor is of an
// organization the caller does not see above theirs: an administrator
// of it, the one kind of its people that acts in a child organization.
const hiddenActor = "an administrator of an organization above"

// hiddenOther is the actor_text of a record whose actor is of an
// organization the caller does not see that is not above theirs: a
// subscriber of another tenant who wrote through a share link into a
// root of the caller's organization, who is no administrator of theirs.
const hiddenOther = "a person of another organization"

// hideActors takes out of recs the actors of organizations c does not
// see (share.OrgRead): a child organization's people read the records of
// what its parent's administrators did to it, but those administrators,
// like everything of the parent, do not exist for them (docs/api.md "Who
// may do what"). One check per organization, however many records.
//
// The hidden actor is named for what it is: hiddenActor for an
// organization above the caller's, hiddenOther for any other (it read
// as an administrator above, which a subscriber of another tenant is
// not).
func (s *server) hideActors(ctx context.Context, c caller, recs []activity.Record, sees func(org uint64) (bool, error)) error {
	var chain []uint64 // c's organization and those above, once
	for i := range recs {
		r := &recs[i]
		org := r.ActorCompanyID
		if org == 0 || org == c.Person.OrganizationID {
			continue
		}
		ok, err := sees(org)
		if err != nil {
			return err
		}
		text := ""
		if !ok {
			if chain == nil {
				if chain, err = s.accounts.Chain(ctx, c.Person.OrganizationID); err != nil && !errors.Is(err, account.ErrNotFound) {
					return err
				}
			}
			text = hiddenOther
			if account.Within(chain, org) {
				text = hiddenActor
			}
		}
		if text != "" {
			r.ActorText, r.ActorCompanyID, r.ActorPersonID, r.ActorGuestID, r.ActorMachineID = text, 0, 0, 0, 0
		}
	}
	return nil
}

// maxActivityText bounds action_text and data_text of activity/create.
const maxActivityText = 4096

// DefaultActivityNotesPerHour is how many notes one person may add to
// the activity log in an hour when Options.ActivityNotesPerHour is 0.
// Each is kept for activity.retention (a year) with up to 8 KiB of text
// that no quota counts, and is read by every total of the lists it is
// in; a client noting what it does adds a few an hour.
const DefaultActivityNotesPerHour = 600

// createActivity answers POST /api/2/activity/create: any signed-in
// person or guest adds a note to the log, as its actor. Form fields:
// activity_type_id (optional; only the note type, the others being
// berth's own to record), action_text and data_text (optional, each at
// most 4096 bytes of UTF-8), and what it is about, at most one of
// acted_on_person_id, acted_on_guest_id, acted_on_company_id and
// acted_on_root_id: a person or guest the caller may read, an
// organization the caller belongs to or manages, a root the caller
// reaches. Without one, the note is about the caller.
func (s *server) createActivity(r *http.Request) (any, error) {
	f, err := form(r)
	if err != nil {
		return nil, err
	}
	if s.opts.Activity == nil {
		return nil, Describe(ErrNotFound, "this server keeps no activity log")
	}
	note, _ := activity.TypeNamed(activity.Note)
	if v := f.Get("activity_type_id"); v != "" {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil || id != note.ID {
			return nil, Describe(ErrInvalidRequest, "activity_type_id must be %d (note): the other types are recorded by berth itself", note.ID)
		}
	}
	c := callerOf(r)
	a := c.Actor()
	rec := activity.Record{ActorType: a.Type, ActorText: a.Text, ActorCompanyID: a.CompanyID, ActorMachineID: a.MachineID,
		ActivityTypeID: note.ID, Processed: true}
	if a.Type == "guest" {
		rec.ActorGuestID = a.PersonID
	} else {
		rec.ActorPersonID = a.PersonID
	}
	for _, field := range []struct {
		name string
		dst  *string
	}{{"action_text", &rec.ActionText}, {"data_text", &rec.DataText}} {
		v := f.Get(field.name)
		if len(v) > maxActivityText || !utf8.ValidString(v) {
			return nil, Describe(ErrInvalidRequest, "%s must be UTF-8 text of at most %d bytes", field.name, maxActivityText)
		}
		*field.dst = v
	}
	if err := s.actedOn(r.Context(), c, f.Get, &rec); err != nil {
		return nil, err
	}
	// Counted once the note is known good, so refusals spend nothing.
	sender := "person:" + strconv.FormatUint(c.Person.ID, 10)
	if ok, _, first := s.notes.Use(sender, 1); !ok {
		if first {
			s.log.Warn("activity notes refused: the person's for this hour are used up", "person_id", c.Person.ID, "per_hour", s.notes.Max())
		}
		return nil, Describe(ErrTooManyRequests, "you have added %d activity notes this hour, as many as berth takes from one person: try again later", s.notes.Max())
	}
	out, err := s.opts.Activity.Create(r.Context(), rec)
	if err != nil {
		s.notes.GiveBack(sender, 1)
		return nil, err
	}
	return encodeActivity(out), nil
}

// actedOn fills rec's acted-on fields from the one acted_on_* field of
// the form, checked against what c may reach.
func (s *server) actedOn(ctx context.Context, c caller, get func(string) string, rec *activity.Record) error {
	var name string
	var id uint64
	for _, n := range []string{"acted_on_person_id", "acted_on_guest_id", "acted_on_company_id", "acted_on_root_id"} {
		v := get(n)
		if v == "" {
			continue
		}
		if name != "" {
			return Describe(ErrInvalidRequest, "give at most one of %s and %s", name, n)
		}
		n64, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n64 == 0 {
			return Describe(ErrInvalidRequest, "%s must be a positive integer", n)
		}
		name, id = n, n64
	}
	switch name {
	case "":
		p := c.Person
		name, id = "acted_on_person_id", p.ID
		if p.Guest {
			name = "acted_on_guest_id"
		}
		fallthrough
	case "acted_on_person_id", "acted_on_guest_id":
		p, err := s.shares.Person(ctx, c, id, share.PersonRead)
		if err != nil {
			return err
		}
		if p.Guest != (name == "acted_on_guest_id") {
			return share.ErrNotFound
		}
		rec.ActedOnType, rec.ActedOnText, rec.ActedOnCompanyID = "person", personLabel(p), p.OrganizationID
		if p.Guest {
			rec.ActedOnType, rec.ActedOnGuestID = "guest", p.ID
		} else {
			rec.ActedOnPersonID = p.ID
		}
	case "acted_on_company_id":
		org, err := s.shares.Organization(ctx, c, id, share.OrgRead)
		if err != nil {
			return err
		}
		rec.ActedOnType, rec.ActedOnText, rec.ActedOnCompanyID = "organization", org.Name, org.ID
	case "acted_on_root_id":
		acc, err := s.shares.Root(ctx, c, id)
		if err != nil {
			return err
		}
		rec.ActedOnType, rec.ActedOnText, rec.ActedOnRootID = "root", acc.Root.Name, acc.Root.ID
		if o, err := s.accounts.RootOwnerOf(ctx, id); err == nil {
			rec.ActedOnCompanyID, rec.ActedOnPersonID = o.OrganizationID, o.PersonID
		} else if !errors.Is(err, account.ErrNotFound) {
			return err
		}
	}
	return nil
}

// personLabel describes p as the log's texts do: the actor text of p.
func personLabel(p account.Person) string {
	return account.Caller{Person: p}.Actor().Text
}
