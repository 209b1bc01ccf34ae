package account

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"berth/kv"
)

// Device passwords: a password per device, for the front ends that cannot
// carry a two-step code (WebDAV Basic). A person makes one after a full
// sign-in; berth generates it, shows it once and keeps only its SHA-256.
// SHA-256 without salt or argon2 is enough, as for tokens (token.go): the
// password is 160 random bits, not something a person chose, so there is
// no dictionary to try and a copy of the database yields nothing usable;
// and checking it costs no argon2 slot, so a WebDAV client may send it
// with every request. Each is tied to a machine record and ends with it
// (DeleteMachine) or with its person (DeletePerson).

// MaxDevicePasswords bounds the device passwords one person holds.
const MaxDevicePasswords = 100

// RevokedDeviceTTL is how long a revoked device password is remembered
// as revoked: a client still sending it (a forgotten mount) is told so,
// and its retries neither cost an argon2 hash nor count toward its
// person's lockout, which would lock them out of every sign-in.
const RevokedDeviceTTL = 30 * 24 * time.Hour

// devicePasswordBytes is the entropy of a device password: 160 bits,
// written as 32 characters of lowercase base32 (a-z, 2-7), which a person
// can type on a phone.
const devicePasswordBytes = 20

var devicePasswordEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// DevicePassword is one device password, without its secret.
type DevicePassword struct {
	ID        uint64
	PersonID  uint64
	MachineID uint64
	Name      string
	Created   time.Time
}

// DevicePasswordInput are the fields of a new device password. MachineID
// names an existing machine of the person; 0 creates a machine for the
// device from Machine (its GUID is ignored: the server assigns one).
type DevicePasswordInput struct {
	Name      string
	MachineID uint64
	Machine   MachineInput
}

type devicePasswordRecord struct {
	ID        uint64    `cbor:"1,keyasint"`
	PersonID  uint64    `cbor:"2,keyasint"`
	MachineID uint64    `cbor:"3,keyasint"`
	Name      string    `cbor:"4,keyasint"`
	Created   time.Time `cbor:"5,keyasint"`
	Hash      []byte    `cbor:"6,keyasint"` // SHA-256 of the password
}

// devicePasswordRef is the record under the password's hash: the live
// device password, or a revoked one's tombstone.
type devicePasswordRef struct {
	ID       uint64 `cbor:"1,keyasint"`
	PersonID uint64 `cbor:"2,keyasint"`
	Revoked  bool   `cbor:"3,keyasint,omitempty"`
}

func (r devicePasswordRecord) public() DevicePassword {
	return DevicePassword{ID: r.ID, PersonID: r.PersonID, MachineID: r.MachineID, Name: r.Name, Created: r.Created}
}

// revokedDeviceError is a revoked device password: ErrInvalidCredentials,
// with a description that says what happened.
type revokedDeviceError struct{}

func (revokedDeviceError) Error() string { return "account: the device password was revoked" }

// Unwrap makes errors.Is(err, ErrInvalidCredentials) true.
func (revokedDeviceError) Unwrap() error { return ErrInvalidCredentials }

// Description tells the client what to do.
func (revokedDeviceError) Description() string {
	return "this device password was revoked; sign in to berth and create a new one for this device"
}

// CreateDevicePassword makes a device password for person personID and
// returns it with its secret, which is shown this once: berth keeps only
// its hash. It records ActDevicePasswordCreated with the actor of ctx.
// Whoever may do so is the caller's to check (a person, for themself,
// after a full sign-in).
// Errors: ErrNotFound (person, or a machine that is not the person's),
// ErrInvalid (name empty, longer than 100 bytes or with control
// characters; a machine field; MaxDevicePasswords reached).
func (s *Service) CreateDevicePassword(ctx context.Context, personID uint64, in DevicePasswordInput) (DevicePassword, string, error) {
	if strings.TrimSpace(in.Name) == "" || len(in.Name) > 100 || hasControl(in.Name) {
		return DevicePassword{}, "", invalid("name", "required, at most 100 bytes, no control characters")
	}
	mi := in.Machine
	for _, f := range []struct{ name, v string }{{"dns_name", mi.DNSName}, {"os_type", mi.OSType}, {"os_version", mi.OSVersion}} {
		if len(f.v) > 255 || hasControl(f.v) {
			return DevicePassword{}, "", invalid(f.name, "longer than 255 bytes or has control characters")
		}
	}
	raw := make([]byte, devicePasswordBytes)
	if _, err := rand.Read(raw); err != nil {
		return DevicePassword{}, "", err
	}
	secret := devicePasswordEncoding.EncodeToString(raw)
	id, err := s.db.NextID(ctx, seqDevicePassword)
	if err != nil {
		return DevicePassword{}, "", err
	}
	var newMachine uint64
	if in.MachineID == 0 {
		if newMachine, err = s.db.NextID(ctx, seqMachine); err != nil {
			return DevicePassword{}, "", err
		}
	}
	full := false
	if in.MachineID == 0 {
		if full, err = s.atMachineBound(ctx, personID); err != nil {
			return DevicePassword{}, "", err
		}
	}
	rec := devicePasswordRecord{ID: id, PersonID: personID, MachineID: in.MachineID, Name: in.Name, Hash: tokenHash(secret)}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		var p Person
		if err := s.get(tx, key(pfxPerson, personID), &p, notFoundf("person %d", personID)); err != nil {
			return err
		}
		// The count below is a scan, which misses a password another
		// transaction adds meanwhile: written back, the person's record
		// makes two of them conflict, and the later counts the other
		// (see touch). The person's deletion reads it too.
		if err := touch(tx, key(pfxPerson, personID)); err != nil {
			return err
		}
		n, err := s.countDevicePasswords(tx, personID)
		if err != nil {
			return err
		}
		if n >= MaxDevicePasswords {
			return invalid("name", "the account already has as many device passwords as berth keeps (100): revoke one first")
		}
		now := s.now()
		rec.Created, rec.MachineID = now, in.MachineID
		var m Machine
		if in.MachineID != 0 {
			if err := s.get(tx, key(pfxMachine, in.MachineID), &m, notFoundf("machine %d", in.MachineID)); err != nil {
				return err
			}
			if m.PersonID != personID {
				return notFoundf("machine %d", in.MachineID)
			}
			// The machine's deletion reads it: see touch.
			if err := touch(tx, key(pfxMachine, m.ID)); err != nil {
				return err
			}
		} else {
			m = Machine{ID: newMachine, PersonID: personID, GUID: strings.ToLower(uuid.NewString()),
				DNSName: mi.DNSName, Created: now, OSType: mi.OSType, OSVersion: mi.OSVersion}
			if full {
				if err := s.makeRoomForMachine(ctx, tx, personID); err != nil {
					return err
				}
			}
			if err := s.insertMachine(tx, &m); err != nil {
				return err
			}
			rec.MachineID = m.ID
		}
		if err := s.put(tx, key(pfxDevicePassword, id), &rec); err != nil {
			return err
		}
		if err := s.put(tx, keyBytes(pfxDevicePasswordHash, rec.Hash), devicePasswordRef{ID: id, PersonID: personID}); err != nil {
			return err
		}
		if err := tx.Set(key(pfxPersonDevicePassword, personID, id), nil); err != nil {
			return err
		}
		return s.record(ctx, tx, devicePasswordChange(ActDevicePasswordCreated, p, rec))
	})
	if err != nil {
		return DevicePassword{}, "", err
	}
	return rec.public(), secret, nil
}

// DevicePasswords returns person personID's device passwords in id
// order, without their secrets. Errors: ErrNotFound (person).
func (s *Service) DevicePasswords(ctx context.Context, personID uint64) ([]DevicePassword, error) {
	var out []DevicePassword
	err := s.db.View(ctx, func(tx kv.Txn) error {
		out = nil
		if ok, err := exists(tx, key(pfxPerson, personID)); err != nil || !ok {
			if err == nil {
				err = notFoundf("person %d", personID)
			}
			return err
		}
		recs, err := s.devicePasswordsOf(tx, personID)
		for _, r := range recs {
			out = append(out, r.public())
		}
		return err
	})
	return out, err
}

// RevokeDevicePassword ends device password id of person personID,
// recording ActDevicePasswordRevoked with the actor of ctx; it fails from
// the next request on. Its machine stays. Errors: ErrNotFound (no such
// device password of that person).
func (s *Service) RevokeDevicePassword(ctx context.Context, personID, id uint64) error {
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var rec devicePasswordRecord
		if err := s.get(tx, key(pfxDevicePassword, id), &rec, notFoundf("device password %d", id)); err != nil {
			return err
		}
		if rec.PersonID != personID {
			return notFoundf("device password %d", id)
		}
		var p Person
		if err := s.get(tx, key(pfxPerson, personID), &p, notFoundf("person %d", personID)); err != nil {
			return err
		}
		if err := s.endDevicePassword(tx, rec); err != nil {
			return err
		}
		return s.record(ctx, tx, devicePasswordChange(ActDevicePasswordRevoked, p, rec))
	})
}

// DeviceCallerRef returns the caller behind login and password when password
// is a live device password of the person login names, with the
// password's machine as the caller's MachineID. ok is false, with no
// error, when password is no device password of login's person: the
// front end goes on to judge it as the main password (Authenticate, which
// counts a wrong one toward the lockout). It hashes no password with
// argon2 and is checked on every request: a revoked device password, a
// deleted machine or person, a disabled account and a lock take effect at
// the next one. Answers are kept until the store's next commit.
//
// Errors: ErrInvalidCredentials (with a description) for a revoked
// device password; ErrAccountLocked while the person is locked by failed
// sign-ins, but at an address the person is known at (Authenticate)
// whose own counter is not locked; ErrInactive for a disabled person or
// organization.
//
// The Caller handed out is the cached one, as LoginCallerRef's: the
// caller must not change it.
func (s *Service) DeviceCallerRef(ctx context.Context, login, password string) (*Caller, bool, error) {
	if !devicePasswordShape(password) {
		return nil, false, nil
	}
	h := string(tokenHash(password))
	// All read here is account records (kv.MetaGeneration), as for
	// LoginCallerRef: a file write does not empty the cache.
	gen := kv.MetaGeneration(s.db)
	c, cached := s.callers.devices.Get(gen, h)
	if !cached {
		var found bool
		var err error
		if c, found, err = s.readDeviceCaller(ctx, gen, h); err != nil || !found {
			return nil, false, err
		}
	}
	if !c.Person.HasLogin(login) {
		return nil, false, nil
	}
	return c, true, nil
}

// readDeviceCaller reads DeviceCallerRef's answer for the password whose
// hash is h, and keeps it. A function of its own so that the Caller its
// transaction fills escapes only on a miss, not on every request.
func (s *Service) readDeviceCaller(ctx context.Context, gen uint64, h string) (*Caller, bool, error) {
	c := new(Caller)
	var found, exempt bool
	err := s.db.View(ctx, func(tx kv.Txn) error {
		found, exempt = false, false
		var ref devicePasswordRef
		switch err := s.get(tx, keyBytes(pfxDevicePasswordHash, []byte(h)), &ref, ErrNotFound); {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		case ref.Revoked:
			return revokedDeviceError{}
		}
		var rec devicePasswordRecord
		switch err := s.get(tx, key(pfxDevicePassword, ref.ID), &rec, ErrNotFound); {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		// A lock strangers' guesses brought does not apply where
		// the person is known (accountLock), as for their tokens; that
		// answer holds for this address only, so it is not kept.
		var err error
		if exempt, err = s.accountLock(ctx, tx, rec.PersonID); err != nil {
			return err
		}
		if *c, err = s.activeCaller(tx, rec.PersonID); err != nil {
			return err
		}
		c.MachineID, found = rec.MachineID, true
		return nil
	})
	if err != nil || !found {
		return nil, false, err
	}
	if !exempt {
		s.callers.devices.Put(gen, h, c)
	}
	return c, true, nil
}

// NeedsDevicePassword reports whether caller c may sign in with a device
// password only where no two-step code can follow the password (WebDAV
// Basic): they use two-step verification (TwoStepMode), or their
// organization's policy requires it (require_two_step_auth), which the
// main password alone would otherwise get around. Answers are kept until
// the store's next commit.
func (s *Service) NeedsDevicePassword(ctx context.Context, c *Caller) (bool, error) {
	if c.Organization.Policy.RequireTwoStepAuth {
		return true, nil
	}
	return s.enrolled(ctx, c.Person.ID)
}

// devicePasswordShape reports whether p could be a device password, so
// that a main password of another shape costs no read.
func devicePasswordShape(p string) bool {
	if len(p) != devicePasswordEncoding.EncodedLen(devicePasswordBytes) {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// devicePasswordsOf reads person personID's device passwords in id order.
func (s *Service) devicePasswordsOf(tx kv.Txn, personID uint64) ([]devicePasswordRecord, error) {
	prefix := key(pfxPersonDevicePassword, personID)
	var ids []uint64
	if err := tx.Scan(prefix, nil, func(k, _ []byte) error {
		ids = append(ids, kv.Uint64At(k, len(prefix)))
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]devicePasswordRecord, 0, len(ids))
	for _, id := range ids {
		var rec devicePasswordRecord
		switch err := s.get(tx, key(pfxDevicePassword, id), &rec, ErrNotFound); {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func (s *Service) countDevicePasswords(tx kv.Txn, personID uint64) (int, error) {
	n := 0
	err := tx.Scan(key(pfxPersonDevicePassword, personID), nil, func(_, _ []byte) error {
		n++
		return nil
	})
	return n, err
}

// endDevicePassword removes rec and leaves its hash marked revoked for
// RevokedDeviceTTL.
func (s *Service) endDevicePassword(tx kv.Txn, rec devicePasswordRecord) error {
	if err := tx.Delete(key(pfxDevicePassword, rec.ID)); err != nil {
		return err
	}
	if err := tx.Delete(key(pfxPersonDevicePassword, rec.PersonID, rec.ID)); err != nil {
		return err
	}
	return s.putTTL(tx, keyBytes(pfxDevicePasswordHash, rec.Hash),
		devicePasswordRef{ID: rec.ID, PersonID: rec.PersonID, Revoked: true}, RevokedDeviceTTL)
}

// endDevicePasswords ends person personID's device passwords of machine
// machineID (0: all of them) and returns how many it ended.
func (s *Service) endDevicePasswords(tx kv.Txn, personID, machineID uint64) (int, error) {
	recs, err := s.devicePasswordsOf(tx, personID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range recs {
		if machineID != 0 && rec.MachineID != machineID {
			continue
		}
		if err := s.endDevicePassword(tx, rec); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// devicePasswordsEnded says, for a password reset's record, how many
// device passwords it ended ("" for none).
func devicePasswordsEnded(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "1 device password ended"
	}
	return strconv.Itoa(n) + " device passwords ended"
}

// devicePasswordChange is a Change acting on person p's device password
// rec: the person, the machine, and the password's name as data.
func devicePasswordChange(activity string, p Person, rec devicePasswordRecord) Change {
	c := personChange(activity, p)
	c.OnMachineID, c.Data = rec.MachineID, rec.Name
	return c
}
