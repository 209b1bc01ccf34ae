// Package activity is the activity log (spec 2.15, 2.16, 4.12): an
// append-only, time-ordered record of every change, written in the
// transaction that makes the change, so that an acknowledged change
// always has its record, after a crash too.
//
// The log knows neither accounts nor files: it stores Records. The daemon
// turns account changes and vfs events into Records (it alone wires the
// domains together) and hands them to Append inside their transactions.
package activity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// Record is one logged action (spec 2.15). An id of 0 is "none" (the
// spec's null); a text of "" is none for ActionText and DataText.
type Record struct {
	ID uint64 `cbor:"1,keyasint"`

	// Who acted: ActorType is "person", "guest", "machine", "system" or
	// "sharelink" (a visitor of a share link, share.LinkVisitor).
	ActorType      string `cbor:"2,keyasint"`
	ActorText      string `cbor:"3,keyasint"`
	ActorCompanyID uint64 `cbor:"4,keyasint,omitempty"`
	ActorGuestID   uint64 `cbor:"5,keyasint,omitempty"`
	ActorMachineID uint64 `cbor:"6,keyasint,omitempty"`
	ActorPersonID  uint64 `cbor:"7,keyasint,omitempty"`

	// What was acted on: ActedOnType is "organization", "person",
	// "guest", "group", "machine", "root", "file" or "folder".
	ActedOnType      string `cbor:"8,keyasint"`
	ActedOnText      string `cbor:"9,keyasint"`
	ActedOnCompanyID uint64 `cbor:"10,keyasint,omitempty"`
	ActedOnGroupID   uint64 `cbor:"11,keyasint,omitempty"`
	ActedOnGuestID   uint64 `cbor:"12,keyasint,omitempty"`
	ActedOnMachineID uint64 `cbor:"13,keyasint,omitempty"`
	ActedOnPersonID  uint64 `cbor:"14,keyasint,omitempty"`
	ActedOnRootID    uint64 `cbor:"15,keyasint,omitempty"`

	ActionText     string `cbor:"16,keyasint,omitempty"`
	DataText       string `cbor:"17,keyasint,omitempty"`
	ActivityTypeID uint64 `cbor:"18,keyasint"`
	// Created is set by Append (in UTC) when zero.
	Created time.Time `cbor:"-"`
	// Processed is the spec's flag; berth keeps no processing queue, so
	// it records every action already processed (docs/api.md).
	Processed bool `cbor:"20,keyasint,omitempty"`
}

// stored is the encoded form: Created as Unix nanoseconds, exact and
// small.
type stored struct {
	Record
	CreatedNs int64 `cbor:"19,keyasint"`
}

// errUnknownType is returned by Append for a record whose ActivityTypeID
// is not in the table (Types).
var errUnknownType = errors.New("activity: unknown activity type")

// Options configure a Log.
type Options struct {
	// Retention is how long a record is kept; 0 keeps records forever.
	Retention time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Log is the activity log over one metadata store. It is safe for
// concurrent use.
type Log struct {
	db        kv.Store
	retention time.Duration
	now       func() time.Time
	byName    map[string]Type
	byID      map[uint64]Type
}

// New returns the log over db.
func New(db kv.Store, o Options) *Log {
	l := &Log{db: db, retention: o.Retention, now: o.Now, byName: map[string]Type{}, byID: map[uint64]Type{}}
	if l.now == nil {
		l.now = time.Now
	}
	for _, t := range table() {
		l.byName[t.Name] = t
		l.byID[t.ID] = t
	}
	return l
}

// Type returns the type of the change named name (an account Act name or
// a vfs operation).
func (l *Log) Type(name string) (Type, bool) {
	t, ok := l.byName[name]
	return t, ok
}

// Append writes r in tx, the transaction of the change it records, with
// a new id and, when r has none, the time now; it returns r as written.
// The record and its index entries share the retention as their TTL.
//
// Errors: errUnknownType (the front ends check TypeByID first); the store's errors.
func (l *Log) Append(ctx context.Context, tx kv.Txn, r Record) (Record, error) {
	if _, ok := l.byID[r.ActivityTypeID]; !ok {
		return Record{}, fmt.Errorf("%w: %d", errUnknownType, r.ActivityTypeID)
	}
	// The sequence is outside the transaction (kv.NextOrderedID); a
	// transaction retried after a conflict takes another, and the gap
	// is harmless. Ordered, not leased: the lists are newest first by
	// id, and on several nodes leased ids interleave by lease.
	id, err := kv.NextOrderedID(ctx, l.db, sequence)
	if err != nil {
		return Record{}, err
	}
	r.ID = id
	if r.Created.IsZero() {
		r.Created = l.now()
	}
	r.Created = r.Created.UTC()
	v, err := cbor.Marshal(stored{Record: r, CreatedNs: r.Created.UnixNano()})
	if err != nil {
		return Record{}, fmt.Errorf("activity: encode: %w", err)
	}
	if err := l.set(tx, recordKey(id), v); err != nil {
		return Record{}, err
	}
	for _, org := range distinct(r.ActorCompanyID, r.ActedOnCompanyID) {
		if err := l.set(tx, orgKey(org, id), nil); err != nil {
			return Record{}, err
		}
	}
	for _, p := range distinct(r.ActorPersonID, r.ActorGuestID, r.ActedOnPersonID, r.ActedOnGuestID) {
		if err := l.set(tx, personKey(p, id), nil); err != nil {
			return Record{}, err
		}
	}
	return r, nil
}

// Create appends r in a transaction of its own (activity/create).
func (l *Log) Create(ctx context.Context, r Record) (Record, error) {
	var out Record
	err := l.db.Update(ctx, func(tx kv.Txn) error {
		var err error
		out, err = l.Append(ctx, tx, r)
		return err
	})
	return out, err
}

func (l *Log) set(tx kv.Txn, k, v []byte) error {
	if l.retention > 0 {
		return tx.SetTTL(k, v, l.retention)
	}
	return tx.Set(k, v)
}

// distinct returns the ids that are not 0, each once.
func distinct(ids ...uint64) []uint64 {
	out := ids[:0]
	for _, id := range ids {
		if id == 0 {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || o == id
		}
		if !dup {
			out = append(out, id)
		}
	}
	return out
}

// Get returns the record with id; found is false when there is none (or
// it outlived the retention).
func (l *Log) Get(ctx context.Context, id uint64) (r Record, found bool, err error) {
	err = l.db.View(ctx, func(tx kv.Txn) error {
		r, found, err = get(tx, id)
		return err
	})
	return r, found, err
}

func get(tx kv.Txn, id uint64) (Record, bool, error) {
	v, err := tx.Get(recordKey(id))
	if errors.Is(err, kv.ErrNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	var s stored
	if err := cbor.Unmarshal(v, &s); err != nil {
		return Record{}, false, fmt.Errorf("activity: decode record %d: %w", id, err)
	}
	s.Record.Created = time.Unix(0, s.CreatedNs).UTC()
	return s.Record, true, nil
}

// Organization returns one page of the records of organization org,
// newest first: limit records from offset, and how many it has in all.
// Only its own records, not its children's: an organization's list is
// what happened in it.
func (l *Log) Organization(ctx context.Context, org uint64, offset, limit int) ([]Record, int, error) {
	return l.OrganizationBefore(ctx, org, 0, offset, limit)
}

// OrganizationBefore is Organization over the records older than the
// record with id before (0: all of them), and total counts those. A
// client paging with the id of the last record it read gets neither
// duplicates nor gaps while new records arrive, which an offset alone
// cannot give in a list whose newest come first.
func (l *Log) OrganizationBefore(ctx context.Context, org, before uint64, offset, limit int) ([]Record, int, error) {
	return l.page(ctx, kv.Key(pfxOrg, org), before, offset, limit)
}

// Person returns one page of the records of person (or guest) id as
// actor or acted on, newest first, and how many there are in all.
func (l *Log) Person(ctx context.Context, id uint64, offset, limit int) ([]Record, int, error) {
	return l.PersonBefore(ctx, id, 0, offset, limit)
}

// PersonBefore is Person over the records older than the record with
// id before (0: all of them), as OrganizationBefore.
func (l *Log) PersonBefore(ctx context.Context, id, before uint64, offset, limit int) ([]Record, int, error) {
	return l.page(ctx, kv.Key(pfxPerson, id), before, offset, limit)
}

// page reads the records of one page of an index. The page costs a scan
// of the index keys to its offset; the total, a scan of the rest of the
// keys (index entries hold no value, and a count kept beside them could
// not follow the TTL's expiries).
//
// With before, the scan starts at the first record older than it: the
// index holds complements of ids, so that is the key of ^(before-1).
func (l *Log) page(ctx context.Context, prefix []byte, before uint64, offset, limit int) ([]Record, int, error) {
	var (
		out   []Record
		total int
		start []byte
	)
	if before != 0 {
		start = kv.AppendUint64(append([]byte(nil), prefix...), ^(before - 1))
	}
	err := l.db.View(ctx, func(tx kv.Txn) error {
		out, total = nil, 0
		var ids []uint64
		if err := tx.Scan(prefix, start, func(k, _ []byte) error {
			if total >= offset && total < offset+limit {
				ids = append(ids, idOf(k, len(prefix)-8))
			}
			total++
			if total&1023 == 0 {
				return ctx.Err()
			}
			return nil
		}); err != nil {
			return err
		}
		for _, id := range ids {
			r, found, err := get(tx, id)
			if err != nil {
				return err
			}
			if found {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, total, err
}

// pruneBatch is the most records one transaction of Prune removes: the
// transactions stay short, so the writers of new records, which touch
// other keys, are never held up behind a large prune.
const pruneBatch = 256

// Prune removes the records older than the retention (and their index
// entries), oldest first, in transactions of pruneBatch records, and
// returns how many it removed; with no retention it removes nothing.
// The store's TTL removes a record after the retention it was written
// under; Prune removes those written under a longer one, or under none,
// when the operator lowered activity.retention (or set it where it was
// 0): without it they stayed their whole old time, or forever. Ids grow
// with time (NextOrderedID), so it stops at the first record that is
// still within the retention.
func (l *Log) Prune(ctx context.Context) (int, error) {
	if l.retention <= 0 {
		return 0, nil
	}
	cutoff := l.now().Add(-l.retention).UnixNano()
	removed := 0
	// Each batch scans on from the record after the last one removed:
	// from the start of the records, it stepped over every record the
	// batches before had deleted, which the store still holds until it
	// compacts them, and a prune of a million records took a quadratic
	// time (TestPruneResumes).
	var from []byte
	for {
		n, more := 0, false
		var last uint64
		err := l.db.Update(ctx, func(tx kv.Txn) error {
			n, more, last = 0, false, 0
			var due []stored
			err := tx.Scan([]byte(pfxRecord), from, func(_, v []byte) error {
				var s stored
				if err := cbor.Unmarshal(v, &s); err != nil {
					return fmt.Errorf("activity: decode a record: %w", err)
				}
				if s.CreatedNs >= cutoff {
					return kv.ErrStop
				}
				if len(due) == pruneBatch {
					more = true
					return kv.ErrStop
				}
				due = append(due, s)
				return nil
			})
			if err != nil {
				return err
			}
			for _, s := range due {
				r := s.Record
				keys := [][]byte{recordKey(r.ID)}
				for _, org := range distinct(r.ActorCompanyID, r.ActedOnCompanyID) {
					keys = append(keys, orgKey(org, r.ID))
				}
				for _, p := range distinct(r.ActorPersonID, r.ActorGuestID, r.ActedOnPersonID, r.ActedOnGuestID) {
					keys = append(keys, personKey(p, r.ID))
				}
				for _, k := range keys {
					if err := tx.Delete(k); err != nil {
						return err
					}
				}
			}
			n = len(due)
			if n > 0 {
				last = due[n-1].ID
			}
			return nil
		})
		removed += n
		if err != nil || !more {
			return removed, err
		}
		from = recordKey(last + 1)
	}
}
