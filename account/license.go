package account

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"strings"

	"berth/kv"
)

// License keys (spec 4.6: GET /api/2/organization/<license_key>; the
// form is berth's choice). A key is 20 bytes from crypto/rand (160 bits:
// unguessable, so knowing it proves nothing is leaked by its lookup)
// written in base32 (A-Z, 2-7: no 0/O or 1/I to misread) in eight groups
// of four joined by '-', like "ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23-4567".
// Lookups ignore case and the dashes. The index acctlicense/ holds the
// 32 characters without dashes.
const (
	licenseKeyBytes = 20
	licenseKeyChars = 32 // base32 of 20 bytes, no padding
	licenseGroup    = 4
)

var licenseEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewLicenseKey returns a fresh random license key in its grouped form.
func NewLicenseKey() (string, error) {
	raw := make([]byte, licenseKeyBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	plain := licenseEncoding.EncodeToString(raw)
	var b strings.Builder
	for i := 0; i < len(plain); i += licenseGroup {
		if i > 0 {
			b.WriteByte('-')
		}
		b.WriteString(plain[i : i+licenseGroup])
	}
	return b.String(), nil
}

// normalLicenseKey is key without dashes, in upper case, or "" when key
// cannot be a license key at all.
func normalLicenseKey(key string) string {
	k := strings.ToUpper(strings.ReplaceAll(key, "-", ""))
	if len(k) != licenseKeyChars {
		return ""
	}
	if _, err := licenseEncoding.DecodeString(k); err != nil {
		return ""
	}
	return k
}

func licenseKey(k string) []byte { return kv.KeyString(pfxLicense, nil, normalLicenseKey(k)) }

type orgRef struct {
	OrganizationID uint64 `cbor:"1,keyasint"`
}

// putLicenseKey indexes org's license key.
func (s *Service) putLicenseKey(tx kv.Txn, org *Organization) error {
	if normalLicenseKey(org.LicenseKey) == "" {
		return nil
	}
	return s.put(tx, licenseKey(org.LicenseKey), orgRef{OrganizationID: org.ID})
}

// OrganizationByLicenseKey returns the organization whose license key is
// key (case and dashes do not matter). Errors: ErrNotFound, also for a
// deleted organization.
func (s *Service) OrganizationByLicenseKey(ctx context.Context, lk string) (Organization, error) {
	var org Organization
	if normalLicenseKey(lk) == "" {
		return org, notFoundf("license key")
	}
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var ref orgRef
		if err := s.get(tx, licenseKey(lk), &ref, notFoundf("license key")); err != nil {
			return err
		}
		if err := s.get(tx, key(pfxOrg, ref.OrganizationID), &org, notFoundf("license key")); err != nil {
			return err
		}
		if org.Deleted {
			return notFoundf("license key")
		}
		return nil
	})
	return org, err
}

// LicenseKey returns organization id's license key, giving it one first
// when it has none (an organization made before berth had keys).
// Errors: ErrNotFound.
func (s *Service) LicenseKey(ctx context.Context, id uint64) (string, error) {
	org, err := s.Organization(ctx, id)
	if err != nil || org.LicenseKey != "" {
		return org.LicenseKey, err
	}
	lk, err := NewLicenseKey()
	if err != nil {
		return "", err
	}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		if err := s.get(tx, key(pfxOrg, id), &org, notFoundf("organization %d", id)); err != nil {
			return err
		}
		if org.LicenseKey != "" {
			return nil // another request gave it one first
		}
		org.LicenseKey = lk
		if err := s.putLicenseKey(tx, &org); err != nil {
			return err
		}
		return s.put(tx, key(pfxOrg, id), &org)
	})
	return org.LicenseKey, err
}
