package account

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"berth/kv"
)

// Machine is a device a person signs in from (spec 2.12). Fields whose
// meaning or type the spec does not show are pointers (nil is null) with
// berth's choice of type.
type Machine struct {
	ID             uint64     `cbor:"1,keyasint"`
	PersonID       uint64     `cbor:"2,keyasint"` // owner; not a spec field, needed for access checks
	GUID           string     `cbor:"3,keyasint"` // assigned by the server, lowercase UUID
	DNSName        string     `cbor:"4,keyasint"` // host name or device make and model
	Created        time.Time  `cbor:"5,keyasint"`
	LastLogin      *time.Time `cbor:"6,keyasint"`
	LastDisconnect *time.Time `cbor:"7,keyasint"`
	OSType         string     `cbor:"8,keyasint"` // win, osx, android, ios, winphone, ...
	OSVersion      string     `cbor:"9,keyasint"`
	AgentVersion   *string    `cbor:"10,keyasint"`
	// BandwidthThrottle in bytes per second.
	BandwidthThrottle *int64 `cbor:"11,keyasint"`
	Throttled         bool   `cbor:"12,keyasint"`
	// Throttle exception schedule, as on Organization.
	ThrottleExceptionDays     *string `cbor:"13,keyasint"`
	ThrottleExceptionDOW      *string `cbor:"14,keyasint"`
	ThrottleExceptionEnd      *string `cbor:"15,keyasint"`
	ThrottleExceptionStart    *string `cbor:"16,keyasint"`
	ThrottleExceptionThrottle *int64  `cbor:"17,keyasint"`
	// MachineType: allowed values not shown; berth leaves it "" unless set.
	MachineType               string  `cbor:"18,keyasint"`
	HealthReportPeriodMinutes *int64  `cbor:"19,keyasint"`
	Locked                    bool    `cbor:"20,keyasint"` // spec section 3 state
	ManualCollisions          *bool   `cbor:"21,keyasint"`
	Nickname                  *string `cbor:"22,keyasint"`
	// FileServer is whether the machine serves its folders to mappings
	// (server/enable, server/disable; not a spec field).
	FileServer bool `cbor:"23,keyasint"`
}

// MachineInput are the optional client fields of the token grants (spec
// 5.1, 5.2).
type MachineInput struct {
	GUID      string
	DNSName   string
	OSType    string
	OSVersion string
}

type machineRef struct {
	MachineID uint64 `cbor:"1,keyasint"`
}

// UpsertMachine records the machine a person signs in from and returns it.
// A GUID the server knows for this person updates that machine: its
// non-empty input fields replace the stored ones and LastLogin becomes
// now. An empty GUID, one the server does not know, or one that belongs
// to another person's machine creates a new machine with a new GUID (a
// client cannot take over someone else's device record by naming its GUID).
// Errors: ErrNotFound (person), ErrInvalid (field too long).
func (s *Service) UpsertMachine(ctx context.Context, personID uint64, in MachineInput) (Machine, error) {
	for _, f := range []struct{ name, v string }{
		{"dns_name", in.DNSName}, {"os_type", in.OSType}, {"os_version", in.OSVersion}, {"guid", in.GUID}} {
		if len(f.v) > 255 || hasControl(f.v) {
			return Machine{}, invalid(f.name, "longer than 255 bytes or has control characters")
		}
	}
	var m Machine
	found := false
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		found = false
		ok, err := exists(tx, key(pfxPerson, personID))
		if err != nil {
			return err
		}
		if !ok {
			return notFoundf("person %d", personID)
		}
		if in.GUID == "" {
			return nil
		}
		var ref machineRef
		err = s.get(tx, guidKey(in.GUID), &ref, ErrNotFound)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.get(tx, key(pfxMachine, ref.MachineID), &m, notFoundf("machine %d", ref.MachineID)); err != nil {
			return err
		}
		if m.PersonID != personID {
			return nil
		}
		found = true
		now := s.now()
		m.LastLogin = &now
		setIf(&m.DNSName, in.DNSName)
		setIf(&m.OSType, in.OSType)
		setIf(&m.OSVersion, in.OSVersion)
		return s.put(tx, key(pfxMachine, m.ID), &m)
	})
	if err != nil || found {
		return m, err
	}
	id, err := s.db.NextID(ctx, seqMachine)
	if err != nil {
		return Machine{}, err
	}
	now := s.now()
	m = Machine{
		ID:        id,
		PersonID:  personID,
		GUID:      strings.ToLower(uuid.NewString()),
		DNSName:   in.DNSName,
		Created:   now,
		LastLogin: &now,
		OSType:    in.OSType,
		OSVersion: in.OSVersion,
	}
	full, err := s.atMachineBound(ctx, personID)
	if err != nil {
		return Machine{}, err
	}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		if full {
			if err := s.makeRoomForMachine(ctx, tx, personID); err != nil {
				return err
			}
		}
		return s.insertMachine(tx, &m)
	})
	if err != nil {
		return Machine{}, err
	}
	return m, nil
}

// atMachineBound reports whether person personID holds MaxMachines
// machines or more, read apart from the transaction that adds one: a
// write that read the person's list of machines would conflict with
// every other sign-in of theirs, and parallel sign-ins (a person's
// devices, on several nodes) failed on it. So the bound is held up to
// the sign-ins that ran at once; makeRoomForMachine brings a person past
// it back under.
func (s *Service) atMachineBound(ctx context.Context, personID uint64) (bool, error) {
	n := 0
	err := s.db.View(ctx, func(tx kv.Txn) error {
		n = 0
		return tx.Scan(key(pfxPersonMachine, personID), nil, func(k, _ []byte) error {
			n++
			return nil
		})
	})
	return n >= s.opts.MaxMachines, err
}

// makeRoomForMachine deletes, while person personID holds MaxMachines
// machines or more, the one signed in from least recently (never, first)
// among those nothing is set up on (no mapping, backup, file server or
// device password), those that no live session was signed in from
// first: such a deletion loses nothing but the record, where a device
// signed in long ago may still refresh its session. Only when every such
// machine has a session do they go with their sessions.
// When too few machines have nothing set up, the new one is refused
// (ErrInvalid): those are a person's own doing, and theirs to delete.
func (s *Service) makeRoomForMachine(ctx context.Context, tx kv.Txn, personID uint64) error {
	ms, err := listed[Machine](s, tx, pfxPersonMachine, personID, pfxMachine)
	if err != nil || len(ms) < s.opts.MaxMachines {
		return err
	}
	dps, err := s.devicePasswordsOf(tx, personID)
	if err != nil {
		return err
	}
	withPassword := map[uint64]bool{}
	for _, dp := range dps {
		withPassword[dp.MachineID] = true
	}
	inUse, err := s.machinesInSession(tx, personID)
	if err != nil {
		return err
	}
	var spare []Machine
	for _, m := range ms {
		if m.FileServer || withPassword[m.ID] {
			continue
		}
		if mms, err := s.mappingsIn(tx, m.ID); err != nil || len(mms) > 0 {
			if err != nil {
				return err
			}
			continue
		}
		if bs, err := s.backupsIn(tx, m.ID); err != nil || len(bs) > 0 {
			if err != nil {
				return err
			}
			continue
		}
		spare = append(spare, m)
	}
	need := len(ms) - s.opts.MaxMachines + 1
	if len(spare) < need {
		return invalid("machine", "the person holds "+strconv.Itoa(len(ms))+" machines, each with mappings, backups, a file server or a device password; delete one first")
	}
	// One without a session first: a device signed in long ago may
	// refresh its session still, and only the session bound
	// (MaxSessions, the oldest first) may end it. A machine signed in
	// from within the last minute counts as in use too: a sign-in made
	// at the same time may not have its session yet, and deleting its
	// machine would fail it (404, its machine gone).
	recent := s.now().Add(-time.Minute)
	busy := func(m Machine) bool { return inUse[m.ID] || lastLogin(m).After(recent) }
	slices.SortFunc(spare, func(a, b Machine) int {
		return cmp.Or(cmpBool(busy(a), busy(b)), lastLogin(a).Compare(lastLogin(b)), cmp.Compare(a.ID, b.ID))
	})
	for _, m := range spare[:need] {
		if err := s.deleteMachineIn(ctx, tx, m.ID); err != nil {
			return err
		}
	}
	return nil
}

// machinesInSession is the set of person personID's machines that a
// live session was signed in from.
func (s *Service) machinesInSession(tx kv.Txn, personID uint64) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	err := s.eachSession(tx, personID, func(_ []byte, fam familyRecord) error {
		if fam.MachineID != 0 {
			out[fam.MachineID] = true
		}
		return nil
	})
	return out, err
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// lastLogin is when m was last signed in from, the zero time for never.
func lastLogin(m Machine) time.Time {
	if m.LastLogin == nil {
		return time.Time{}
	}
	return *m.LastLogin
}

// insertMachine stores new machine m of m.PersonID with its GUID and its
// place in the person's and the organization's lists and counts.
func (s *Service) insertMachine(tx kv.Txn, m *Machine) error {
	ref, err := s.codec.marshal(machineRef{MachineID: m.ID})
	if err != nil {
		return err
	}
	if err := tx.Set(guidKey(m.GUID), ref); err != nil {
		return err
	}
	if err := tx.Set(key(pfxPersonMachine, m.PersonID, m.ID), nil); err != nil {
		return err
	}
	var p Person
	if err := s.get(tx, key(pfxPerson, m.PersonID), &p, notFoundf("person %d", m.PersonID)); err != nil {
		return err
	}
	if err := tx.Set(key(pfxOrgMachine, p.OrganizationID, m.ID), nil); err != nil {
		return err
	}
	if err := s.countIn(tx, p.OrganizationID, Counts{Machines: 1}, 1); err != nil {
		return err
	}
	return s.put(tx, key(pfxMachine, m.ID), m)
}

func setIf(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// Machine returns the machine with id, or ErrNotFound.
func (s *Service) Machine(ctx context.Context, id uint64) (Machine, error) {
	var m Machine
	err := s.db.View(ctx, func(tx kv.Txn) error {
		return s.get(tx, key(pfxMachine, id), &m, notFoundf("machine %d", id))
	})
	return m, err
}

// MachineByGUID returns the machine with the GUID (case-insensitive), or ErrNotFound.
func (s *Service) MachineByGUID(ctx context.Context, guid string) (Machine, error) {
	var m Machine
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var ref machineRef
		if err := s.get(tx, guidKey(guid), &ref, notFoundf("machine %q", guid)); err != nil {
			return err
		}
		return s.get(tx, key(pfxMachine, ref.MachineID), &m, notFoundf("machine %q", guid))
	})
	return m, err
}

// Machines returns the person's machines in id order.
func (s *Service) Machines(ctx context.Context, personID uint64) ([]Machine, error) {
	var out []Machine
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		out, err = listed[Machine](s, tx, pfxPersonMachine, personID, pfxMachine)
		return err
	})
	return out, err
}

// OrganizationMachines returns one page of the machines of organization
// id's persons and guests, in id order, and how many there are (its
// direct machine count). Errors: ErrNotFound.
func (s *Service) OrganizationMachines(ctx context.Context, id uint64, offset, limit int) ([]Machine, int, error) {
	return listPage[Machine](ctx, s, id, pfxOrgMachine, pfxMachine, func(c Counts) int64 { return c.Machines }, offset, limit)
}

// DeleteMachine removes machine id: its GUID, its place in its person's
// and organization's lists and counts, its mappings and backups (not
// their roots), the sessions signed in from it and its device passwords,
// in one transaction, recording
// ActMachineDeleted. Its tokens and device passwords fail from the next
// request on. Errors: ErrNotFound.
func (s *Service) DeleteMachine(ctx context.Context, id uint64) error {
	return s.db.Update(ctx, func(tx kv.Txn) error { return s.deleteMachineIn(ctx, tx, id) })
}

// deleteMachineIn is DeleteMachine's work, in tx.
func (s *Service) deleteMachineIn(ctx context.Context, tx kv.Txn, id uint64) error {
	var m Machine
	if err := s.get(tx, key(pfxMachine, id), &m, notFoundf("machine %d", id)); err != nil {
		return err
	}
	var p Person
	if err := s.get(tx, key(pfxPerson, m.PersonID), &p, notFoundf("person %d", m.PersonID)); err != nil {
		return err
	}
	for _, k := range [][]byte{guidKey(m.GUID), key(pfxMachine, id), key(pfxPersonMachine, p.ID, id), key(pfxOrgMachine, p.OrganizationID, id)} {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	if err := s.countIn(tx, p.OrganizationID, Counts{Machines: 1}, -1); err != nil {
		return err
	}
	if err := s.endMachineSetup(tx, id); err != nil {
		return err
	}
	if err := s.endMachineSessions(tx, p.ID, id); err != nil {
		return err
	}
	if _, err := s.endDevicePasswords(tx, p.ID, id); err != nil {
		return err
	}
	return s.record(ctx, tx, machineChange(ActMachineDeleted, p, m))
}

// endMachineSetup removes machine id's mappings and backups: records of
// a machine nobody reaches any more, left behind they only grew the
// store. The roots stay, backup roots with their revisions (as a
// backup's delete keeps them).
func (s *Service) endMachineSetup(tx kv.Txn, id uint64) error {
	mms, err := s.mappingsIn(tx, id)
	if err != nil {
		return err
	}
	for _, mm := range mms {
		for _, k := range [][]byte{key(pfxMapping, mm.ID), key(pfxMachineMapping, id, mm.ID)} {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
	}
	bs, err := s.backupsIn(tx, id)
	if err != nil {
		return err
	}
	for _, b := range bs {
		for _, k := range [][]byte{key(pfxBackup, b.RootID), key(pfxMachineBackup, id, b.RootID)} {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// endMachineSessions ends person personID's sessions signed in from
// machine machineID.
func (s *Service) endMachineSessions(tx kv.Txn, personID, machineID uint64) error {
	return s.eachSession(tx, personID, func(f []byte, fam familyRecord) error {
		if fam.MachineID != machineID {
			return nil
		}
		return s.deleteFamily(tx, personID, f)
	})
}

// machineChange is a Change acting on machine m of person p.
func machineChange(activity string, p Person, m Machine) Change {
	text := m.DNSName
	if text == "" {
		text = "machine " + strconv.FormatUint(m.ID, 10)
	}
	return Change{Activity: activity, OnType: "machine", OnText: text, OnCompanyID: p.OrganizationID,
		OnMachineID: m.ID, OnPersonID: p.ID}
}

// MachineSeen records that machine id's agent connected (online true:
// last_login, and agent_version when not empty) or went (last_disconnect)
// at at. It records no activity: an agent reconnecting is not a change
// anyone acted on. Errors: ErrNotFound, ErrInvalid (version too long).
func (s *Service) MachineSeen(ctx context.Context, id uint64, online bool, agentVersion string, at time.Time) error {
	if len(agentVersion) > 64 || hasControl(agentVersion) {
		return invalid("agent_version", "longer than 64 bytes or has control characters")
	}
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var m Machine
		if err := s.get(tx, key(pfxMachine, id), &m, notFoundf("machine %d", id)); err != nil {
			return err
		}
		at := at.UTC()
		if online {
			m.LastLogin = &at
			if agentVersion != "" {
				v := agentVersion
				m.AgentVersion = &v
			}
		} else {
			m.LastDisconnect = &at
		}
		return s.put(tx, key(pfxMachine, id), &m)
	})
}
