package account

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"berth/kv"
)

// ImportReport says what one import of a directory server did.
type ImportReport struct {
	AuthSourceID uint64
	// Entries the search returned.
	Entries int
	// Created are the persons made for new entries. They have no sync
	// root: the caller makes one (share.NewRoot), as for any new person.
	// An import that fails returns those it made before it did.
	Created []Person
	// Rootless are the source's persons found again who still have no
	// sync root (RootID 0): an import before made them, and their root
	// was never made (the caller's step after the import failed, or the
	// process was killed between). The caller makes theirs as for
	// Created, so each import repairs what an earlier one left.
	Rootless []Person
	// Updated persons had their names or e-mail address changed;
	// Enabled were disabled by an earlier import and are back in the
	// directory; Disabled are gone from it; Unchanged the rest.
	Updated, Enabled, Disabled, Unchanged int
	// Skipped are the entries that made no person, each with why (a
	// missing uid, a login taken by another person, the organization's
	// num_users_maximum reached, admin_create_users withheld), the
	// first maxSkipped of them; SkippedTotal counts them all.
	Skipped      []string
	SkippedTotal int
}

// String sums the report up, for the log and the activity record.
func (r ImportReport) String() string {
	return fmt.Sprintf("%d entries: %d created, %d updated, %d enabled, %d disabled, %d unchanged, %d skipped",
		r.Entries, len(r.Created), r.Updated, r.Enabled, r.Disabled, r.Unchanged, r.SkippedTotal)
}

// maxSkipped bounds the reasons a report keeps; the count goes on.
const maxSkipped = 100

func (r *ImportReport) skip(format string, args ...any) {
	r.SkippedTotal++
	if len(r.Skipped) < maxSkipped {
		r.Skipped = append(r.Skipped, fmt.Sprintf(format, args...))
	}
}

// ImportAuthSource reads the persons of directory server id and brings
// its organization's persons in line (docs/api.md "Directory servers"):
// an entry with no person gets one (username its uid, e-mail its mail or
// uid@domain, names from givenName, sn and cn; no password of berth's);
// an imported person's names and e-mail follow their entry; one whose
// entry is gone is disabled, their files kept; one that the import
// disabled is enabled again when the entry returns, one an administrator
// disabled is not. New persons count against num_users_maximum as any
// other, and are made only where the organization's administrators may
// create users (admin_create_users, as EffectivePolicy has it). The
// outcome is recorded as ActAuthSourceImported, a failure too, and kept
// on the source (LastImport, LastError). Imports run one at a time.
//
// Errors: ErrNotFound, ErrDirectoryDisabled, a *DirectoryError
// (ErrDirectory) when the server cannot be reached or refuses berth.
func (s *Service) ImportAuthSource(ctx context.Context, id uint64) (ImportReport, error) {
	rep := ImportReport{AuthSourceID: id}
	select {
	case s.dir.importing <- struct{}{}:
		defer func() { <-s.dir.importing }()
	case <-ctx.Done():
		return rep, ctx.Err()
	}
	a, err := s.AuthSource(ctx, id)
	if err != nil {
		return rep, err
	}
	ok, err := s.ADEnabled(ctx, a.OrganizationID)
	if err != nil {
		return rep, err
	}
	if !ok {
		return rep, directoryRefused(a.OrganizationID)
	}
	entries, err := s.search(ctx, a)
	if err == nil {
		rep.Entries = len(entries)
		err = s.apply(ctx, a, entries, &rep)
	}
	if ctx.Err() != nil {
		return rep, errors.Join(err, ctx.Err())
	}
	if ferr := s.finishImport(context.WithoutCancel(ctx), a, rep, err); ferr != nil {
		return rep, errors.Join(err, ferr)
	}
	return rep, err
}

// finishImport keeps the outcome on the source and in the activity log.
func (s *Service) finishImport(ctx context.Context, a AuthSource, rep ImportReport, failure error) error {
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var cur AuthSource
		err := s.get(tx, key(pfxAuthSource, a.ID), &cur, ErrNotFound)
		if errors.Is(err, ErrNotFound) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		cur.LastImport, cur.LastError = s.now(), ""
		c := authSourceChange(ActAuthSourceImported, cur)
		c.Data = fmt.Sprintf("auth source %d: %s", a.ID, rep)
		if failure != nil {
			var de *DirectoryError
			cur.LastError = failure.Error()
			if errors.As(failure, &de) {
				cur.LastError = de.Description()
			}
			c.Action = "failed: " + cur.LastError
		}
		if err := s.put(tx, key(pfxAuthSource, a.ID), &cur); err != nil {
			return err
		}
		return s.record(ctx, tx, c)
	})
}

// sourceMembers returns the persons linked to source id, by folded uid.
func (s *Service) sourceMembers(ctx context.Context, id uint64) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := s.db.View(ctx, func(tx kv.Txn) error {
		clear(out)
		prefix := key(pfxAuthSourcePerson, id)
		return tx.Scan(prefix, nil, func(k, v []byte) error {
			var m directoryMember
			if err := s.codec.unmarshal(v, &m); err != nil {
				return err
			}
			out[foldLogin(m.UID)] = kv.Uint64At(k, len(prefix))
			return nil
		})
	})
	return out, err
}

// apply brings the source's persons in line with entries, one
// transaction per person, so that a large directory fits and what was
// done stays done if the import stops halfway.
func (s *Service) apply(ctx context.Context, a AuthSource, entries []directoryEntry, rep *ImportReport) error {
	members, err := s.sourceMembers(ctx, a.ID)
	if err != nil {
		return err
	}
	// New entries are new users: an import creates them only where the
	// organization's administrators may create users (admin_create_users
	// in the policy they act under, which an ancestor below the top
	// level withholds too), as person/create does. Otherwise a child's
	// administrator whom the parent withheld it from set up a directory
	// server of their own and imported as many persons as they liked.
	pol, err := s.EffectivePolicy(ctx, a.OrganizationID)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	limited := false
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		uid := strings.TrimSpace(e.UID)
		if uid == "" {
			rep.skip("%s: no uid", e.DN)
			continue
		}
		f := foldLogin(uid)
		if seen[f] {
			rep.skip("%s: uid %q appears twice", e.DN, uid)
			continue
		}
		seen[f] = true
		if pid, ok := members[f]; ok {
			switch err := s.refreshMember(ctx, a, pid, e, rep); {
			case err == nil:
				continue
			case errors.Is(err, ErrNotFound):
				// The person was deleted: the entry makes a new one.
			case errors.Is(err, ErrInvalid), errors.Is(err, ErrExists):
				rep.skip("%s: %v", uid, err)
				continue
			default:
				return err
			}
		}
		if !pol.AdminCreateUsers {
			rep.skip("%s: the organization's policy does not let its administrators create users (admin_create_users)", uid)
			continue
		}
		if limited {
			rep.skip("%s: the organization holds its maximum of users (num_users_maximum)", uid)
			continue
		}
		err := s.createMember(ctx, a, e, uid, rep)
		switch {
		case errors.Is(err, ErrUserLimitExceeded):
			limited = true
			rep.skip("%s: the organization holds its maximum of users (num_users_maximum)", uid)
		case errors.Is(err, ErrExists):
			rep.skip("%s: the username or e-mail address is another person's", uid)
		case errors.Is(err, ErrInvalid):
			rep.skip("%s: %v", uid, err)
		case err != nil:
			return err
		}
	}
	for uid, pid := range members {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !seen[uid] {
			if err := s.disableMember(ctx, a, pid, rep); err != nil {
				return err
			}
		}
	}
	return nil
}

// entryPerson is the person entry e describes, of a's organization.
func entryPerson(a AuthSource, e directoryEntry, uid string) (first, last, display, email string) {
	email = strings.TrimSpace(e.Mail)
	if email == "" && a.Domain != "" {
		email = uid + "@" + a.Domain
	}
	first, last, display = strings.TrimSpace(e.GivenName), strings.TrimSpace(e.SN), strings.TrimSpace(e.CN)
	return
}

// createMember makes the person of a new entry and links them to a.
func (s *Service) createMember(ctx context.Context, a AuthSource, e directoryEntry, uid string, rep *ImportReport) error {
	first, last, display, email := entryPerson(a, e, uid)
	p, _, err := s.personOf(PersonInput{OrganizationID: a.OrganizationID, Username: uid, Email: email,
		FirstName: first, LastName: last, DisplayName: display, NoPassword: true})
	if err != nil {
		return err
	}
	// No hash: the directory judges the person's password
	// (verifySecret), and hashing a random one per entry would make a
	// large import take minutes.
	p.AuthSourceID = a.ID
	if p.ID, err = s.db.NextID(ctx, seqPerson); err != nil {
		return err
	}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		// The source is read here, so that a DeleteAuthSource
		// committed meanwhile fails this one (a conflict, then
		// ErrNotFound), and written back as it is, so that this one
		// committed meanwhile fails the deletion's last transaction,
		// which reads the source (a conflict, then it finds this
		// person's link too): its scan of the links does not see one
		// made after it began. No person is linked to a source that is
		// gone.
		src := key(pfxAuthSource, a.ID)
		v, err := tx.Get(src)
		if errors.Is(err, kv.ErrNotFound) {
			return notFoundf("auth source %d", a.ID)
		}
		if err != nil {
			return err
		}
		if err := tx.Set(src, v); err != nil {
			return err
		}
		if err := s.insertPerson(tx, &p); err != nil {
			return err
		}
		if err := s.put(tx, key(pfxAuthSourcePerson, a.ID, p.ID), directoryMember{UID: uid, DN: e.DN}); err != nil {
			return err
		}
		c := personChange(ActPersonCreated, p)
		c.Action = "imported from the directory server " + a.URL()
		return s.record(ctx, tx, c)
	})
	if err != nil {
		return err
	}
	rep.Created = append(rep.Created, p)
	return nil
}

// refreshMember brings person pid in line with their entry e: names,
// e-mail and DN, and enabled again if an import disabled them.
// Errors: ErrNotFound when the person is gone (their link goes too).
func (s *Service) refreshMember(ctx context.Context, a AuthSource, pid uint64, e directoryEntry, rep *ImportReport) error {
	outcome := ""
	var rootless *Person
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		outcome, rootless = "", nil
		var m directoryMember
		if err := s.get(tx, key(pfxAuthSourcePerson, a.ID, pid), &m, ErrNotFound); err != nil {
			return err
		}
		var cur Person
		if err := s.get(tx, key(pfxPerson, pid), &cur, ErrNotFound); errors.Is(err, ErrNotFound) {
			// Deleted by an administrator: the entry makes a new person.
			if err := tx.Delete(key(pfxAuthSourcePerson, a.ID, pid)); err != nil {
				return err
			}
			return notFoundf("person %d", pid)
		} else if err != nil {
			return err
		}
		if cur.RootID == 0 && !cur.Guest {
			rootless = &cur
		}
		p := cur
		first, last, display, email := entryPerson(a, e, m.UID)
		p.FirstName, p.LastName, p.Email = first, last, email
		if display != "" {
			p.DisplayName = display
		} else {
			p.DisplayName = defaultDisplayName(p)
		}
		enable := m.DisabledByImport
		if enable {
			p.Active = true
		}
		if p == cur && m.DN == e.DN && !enable {
			outcome = "unchanged"
			return nil
		}
		if err := p.validate(); err != nil {
			return err
		}
		if err := s.checkLoginsFree(tx, pid, p.Username, p.Email); err != nil {
			return err
		}
		if err := s.putPerson(tx, &p, &cur); err != nil {
			return err
		}
		m.DN, m.DisabledByImport = e.DN, false
		if err := s.put(tx, key(pfxAuthSourcePerson, a.ID, pid), m); err != nil {
			return err
		}
		outcome = "updated"
		if enable {
			outcome = "enabled"
		}
		if p == cur {
			return nil // only the DN moved
		}
		c := personChange(ActPersonUpdated, p)
		c.Data = personChangedFields(cur, p)
		c.Action = "updated from the directory server " + a.URL()
		if enable {
			c.Action = "enabled again: back in the directory server " + a.URL()
		}
		return s.record(ctx, tx, c)
	})
	if err == nil && rootless != nil {
		rep.Rootless = append(rep.Rootless, *rootless)
	}
	switch outcome {
	case "unchanged":
		rep.Unchanged++
	case "updated":
		rep.Updated++
	case "enabled":
		rep.Enabled++
	}
	return err
}

// disableMember disables person pid, whose entry is gone, and remembers
// that the import did it. A person already disabled is left as they are.
func (s *Service) disableMember(ctx context.Context, a AuthSource, pid uint64, rep *ImportReport) error {
	disabled := false
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		disabled = false
		var m directoryMember
		if err := s.get(tx, key(pfxAuthSourcePerson, a.ID, pid), &m, ErrNotFound); errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		var p Person
		if err := s.get(tx, key(pfxPerson, pid), &p, ErrNotFound); errors.Is(err, ErrNotFound) {
			return tx.Delete(key(pfxAuthSourcePerson, a.ID, pid))
		} else if err != nil {
			return err
		}
		if !p.Active {
			return nil
		}
		cur := p
		p.Active = false
		if err := s.putPerson(tx, &p, &cur); err != nil {
			return err
		}
		if err := s.revokeAll(tx, pid); err != nil {
			return err
		}
		m.DisabledByImport = true
		if err := s.put(tx, key(pfxAuthSourcePerson, a.ID, pid), m); err != nil {
			return err
		}
		disabled = true
		c := personChange(ActPersonUpdated, p)
		c.Data = "active"
		c.Action = "disabled: gone from the directory server " + a.URL()
		return s.record(ctx, tx, c)
	})
	if disabled {
		rep.Disabled++
	}
	return err
}

// recheckDirectory asks, before the refresh grant of the refresh token
// of hash h, whether the directory the token's person was imported from
// still holds them (holds), rather than waiting up to an import interval
// for the import to find them gone. Gone, or left out by the source's
// filter, they are disabled as that import would (disableMember: their
// sessions end, and an import that finds them back enables them again),
// and the refresh is refused with ErrInactive. A directory that does not
// answer refuses nothing: the last import's word stands, as it does for
// every other use of the session, so an outage of the directory does
// not sign out every device of its persons; it is asked within
// directory.timeout, and not again for as long after it did not answer.
// A token that is unknown,
// used or expired, and a person not imported or not active, are left to
// the refresh itself.
func (s *Service) recheckDirectory(ctx context.Context, h []byte) error {
	var (
		a   AuthSource
		m   directoryMember
		pid uint64
	)
	err := s.db.View(ctx, func(tx kv.Txn) error {
		pid = 0
		var rr refreshRecord
		if err := s.get(tx, keyBytes(pfxRefresh, h), &rr, ErrNotFound); err != nil {
			return err
		}
		if rr.Used || !s.now().Before(rr.Expires) {
			return ErrNotFound
		}
		var p Person
		if err := s.get(tx, key(pfxPerson, rr.PersonID), &p, ErrNotFound); err != nil {
			return err
		}
		if p.AuthSourceID == 0 || !p.Active {
			return ErrNotFound
		}
		if err := s.get(tx, key(pfxAuthSource, p.AuthSourceID), &a, ErrNotFound); err != nil {
			return err
		}
		pid = p.ID
		return s.get(tx, key(pfxAuthSourcePerson, p.AuthSourceID, p.ID), &m, ErrNotFound)
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	// The whole question, a slot of binds included, is bounded by
	// directory.timeout: a refresh waits no longer on a directory that
	// hangs (connect, bind and search are each bounded by it alone).
	// One that did not answer is not asked again for as long, so that
	// while it is down refreshes do not pile up waiting on it.
	if s.dir.quiet(a.ID, time.Now()) {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, s.dir.opts.Timeout)
	defer cancel()
	held, err := s.holds(qctx, a, m.UID)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // the request ended
		}
		s.dir.failed(a.ID, time.Now())
		return nil // not the directory's word
	}
	if held {
		return nil
	}
	if err := s.disableMember(ctx, a, pid, &ImportReport{}); err != nil {
		return err
	}
	return ErrInactive
}

// verifyDirectory judges the password of p, imported from a directory
// server, by binding to it as p's entry. A person whose source is gone
// has no password at all.
func (s *Service) verifyDirectory(ctx context.Context, p Person, password string) (bool, error) {
	var a AuthSource
	var m directoryMember
	found := true
	err := s.db.View(ctx, func(tx kv.Txn) error {
		found = true
		for _, g := range []struct {
			k []byte
			v any
		}{{key(pfxAuthSource, p.AuthSourceID), &a}, {key(pfxAuthSourcePerson, p.AuthSourceID, p.ID), &m}} {
			if err := s.get(tx, g.k, g.v, ErrNotFound); errors.Is(err, ErrNotFound) {
				found = false
				return nil
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || !found {
		return false, err
	}
	return s.bindAs(ctx, a, m.DN, password)
}
