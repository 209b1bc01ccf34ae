package daemon

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"berth/account"
	"berth/activity"
	"berth/kv"
	"berth/vfs"
)

// The activity log hears of changes from the two domains that make them,
// inside their transactions; neither knows the log (DESIGN: events go
// up), so the translation to its records is wired here.

// accountJournal records account changes (account.Options.Journal).
type accountJournal struct{ log *activity.Log }

// Record implements account.Journal.
func (j accountJournal) Record(tx kv.Txn, c account.Change) error {
	typ, ok := j.log.Type(c.Activity)
	if !ok {
		return fmt.Errorf("activity: no activity type for the account change %q", c.Activity)
	}
	r := actorRecord(c.Actor)
	r.ActivityTypeID = typ.ID
	r.Created = c.Time
	r.ActedOnType, r.ActedOnText = c.OnType, c.OnText
	r.ActedOnCompanyID, r.ActedOnGroupID, r.ActedOnGuestID = c.OnCompanyID, c.OnGroupID, c.OnGuestID
	r.ActedOnMachineID, r.ActedOnPersonID, r.ActedOnRootID = c.OnMachineID, c.OnPersonID, c.OnRootID
	r.ActionText, r.DataText = c.Action, c.Data
	// account's Journal takes no context: the record's id comes from a
	// sequence, which needs none to be cancelled.
	_, err := j.log.Append(context.Background(), tx, r)
	return err
}

// fileJournal records the changes of the file system (vfs.Options.Journal).
// The file system is opened before the account service, which owners
// then names: until it does, records carry the root but not its owner.
type fileJournal struct {
	log    *activity.Log
	owners atomic.Pointer[account.Service]
}

// Record implements vfs.Journal. The actor is the change's
// (vfs.WriteOptions.Actor), else the request's (account.WithActor: locks
// and roots take no WriteOptions), else the system's.
func (j *fileJournal) Record(ctx context.Context, tx kv.Txn, ev vfs.Event) error {
	typ, ok := j.log.Type(string(ev.Op))
	if !ok {
		return fmt.Errorf("activity: no activity type for the file operation %q", ev.Op)
	}
	actor, ok := ev.Actor.(account.Actor)
	if !ok {
		actor = account.ActorFrom(ctx)
	}
	r := actorRecord(actor)
	r.ActivityTypeID = typ.ID
	r.Created = ev.Time
	r.ActedOnRootID = ev.RootID
	switch {
	case ev.Op == vfs.OpCreateRoot || ev.Op == vfs.OpDeleteRoot:
		r.ActedOnType = "root"
	case ev.Dir:
		r.ActedOnType = "folder"
	default:
		r.ActedOnType = "file"
	}
	r.ActedOnText = ev.Name
	if r.ActedOnText == "" {
		r.ActedOnText = r.ActedOnType + " " + strconv.FormatUint(ev.NodeID, 10)
	}
	switch ev.Op {
	case vfs.OpWrite:
		r.ActionText = "new revision"
		if ev.Created {
			r.ActionText = "new file"
		}
		r.DataText = strconv.FormatInt(ev.Size, 10) + " bytes"
	case vfs.OpRename, vfs.OpMove:
		// Acted on is the item as it was; data_text what it is now.
		// Both were the new name, so the log never said which item a
		// rename had renamed.
		if ev.OldName != "" {
			r.ActedOnText = ev.OldName
		}
		r.DataText = ev.Name
		if ev.OldPath != "" && ev.Path != "" {
			// A move says from where to where: its names are often
			// the same.
			r.DataText = "from " + ev.OldPath + " to " + ev.Path
		}
	case vfs.OpCopy:
		r.DataText = ev.Name
	case vfs.OpUnlock:
		if ev.Forced != nil {
			held, err := j.holder(ctx, *ev.Forced)
			if err != nil {
				return err
			}
			r.ActionText, r.DataText = "forced unlock", held
		}
	}
	if s := j.owners.Load(); s != nil {
		o, err := s.RootOwnerOf(ctx, ev.RootID)
		switch {
		case err == nil:
			r.ActedOnCompanyID, r.ActedOnPersonID = o.OrganizationID, o.PersonID
		case !errors.Is(err, account.ErrNotFound):
			return err
		}
	}
	_, err := j.log.Append(ctx, tx, r)
	return err
}

// holder is the data_text of a forced unlock's record: who held the lock
// it ended (a forced unlock ends others' locks, so its actor is not the
// holder), and whether it was a WebDAV client's.
func (j *fileJournal) holder(ctx context.Context, l vfs.Lock) (string, error) {
	who := l.Holder
	if s := j.owners.Load(); s != nil && who != "" {
		var err error
		if who, err = s.PrincipalText(ctx, who); err != nil {
			return "", err
		}
	}
	if who == "" {
		who = "no one named"
	}
	if l.TokenRequired {
		return "held by " + who + ", over WebDAV", nil
	}
	return "held by " + who, nil
}

// actorRecord is a record with a's actor fields.
func actorRecord(a account.Actor) activity.Record {
	r := activity.Record{ActorType: a.Type, ActorText: a.Text, ActorCompanyID: a.CompanyID, ActorMachineID: a.MachineID, Processed: true}
	if a.Type == "guest" {
		r.ActorGuestID = a.PersonID
	} else {
		r.ActorPersonID = a.PersonID
	}
	return r
}
