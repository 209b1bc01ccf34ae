package account

import (
	"strings"

	"berth/kv"
)

// Key layout of the account package, following kv's rules (kv package
// doc): a one-word lowercase name and '/', then 8-byte big-endian integers,
// then at most one variable-length field. Every name starts with "acct" so
// no other package's prefix (vfs takes one capital letter each) can
// collide with ours.
// Values are CBOR (codec.go).
//
//	key                                      value           TTL
//	acctorg/<org>                            Organization    -
//	acctperson/<person>                      Person          -
//	acctlogin/<lower(username|email)>        loginRef        -   one namespace for usernames and e-mails
//	acctorgperson/<org><person>              empty           -   persons of an organization
//	acctmachine/<machine>                    Machine         -
//	acctguid/<lower(guid)>                   machineRef      -
//	acctpersonmachine/<person><machine>      empty           -   machines of a person
//	acctfail/<subject>                       failRecord      lockout window, from the first attempt not yet succeeded
//	acctlock/<subject>                       lockRecord      lock duration
//	accttoka/<sha256(access token)>          accessRecord    AccessTTL
//	accttokr/<sha256(refresh token)>         refreshRecord   RefreshTTL (kept as a "used" tombstone after rotation)
//	acctfam/<family id, 16 bytes>            familyRecord    RefreshTTL, renewed on every refresh
//	acctpersonfam/<person><family id>        empty           like its family; for RevokeAll
//	acctorgchild/<parent><child>             empty           -   child organizations (tree.go)
//	acctcount/<org>                          countRec        -   what an organization holds, itself and with its descendants (counts.go)
//	acctroot/<root>                          RootOwner       -   who owns a vfs root (roots.go)
//	acctorgroot/<org><root>                  empty           -   roots owned in an organization
//	acctorgguest/<org><guest>                empty           -   guests of an organization (acctorgperson/ holds the rest)
//	acctgroup/<group>                        Group           -   (group.go)
//	acctorggroup/<org><group>                empty           -   groups of an organization
//	acctgroupperson/<group><person>          empty           -   a group's member persons
//	acctgroupgroup/<group><member group>     empty           -   a group's member groups
//	acctpersongroup/<person><group>          empty           -   the groups a person is a direct member of
//	acctgroupparent/<member group><group>    empty           -   the groups a group is a direct member of
//	acctlicense/<license key>                orgRef          -   an organization by its license key (license.go), upper case without dashes
//	acctorgmachine/<org><machine>            empty           -   machines of an organization's persons
//	acctdevpw/<device password>              devicePasswordRecord -   (devicepw.go)
//	acctdevhash/<sha256(device password)>    devicePasswordRef    -   live; a revoked one stays, marked, for RevokedDeviceTTL
//	acctpersondevpw/<person><device password> empty          -   device passwords of a person
//	acctauthsrc/<source>                     AuthSource      -   a directory server (authsource.go)
//	acctorgauthsrc/<org><source>             empty           -   directory servers of an organization
//	acctsrcperson/<source><person>           directoryMember -   persons imported from a directory server
//	accttwostep/<person>                     twoStepRecord   -   a person's confirmed two-step verification (twostep.go)
//	accttwostepnew/<person>                  twoStepPending  TwoStep.CodeTTL   an enrollment waiting for its first code
//	accttwostepcode/<person>                 twoStepCode     TwoStep.CodeTTL   the e-mail or SMS code of a sign-in
//
// <subject> is "p"<person> for a known login and "l"<sha256(lower(login))>
// for an unknown one, so unknown logins lock exactly like known ones and
// lockout reveals nothing about which accounts exist. "t"<person> counts
// the person's wrong two-step codes: apart from "p", whose count a right
// password clears, which would give a guesser who has the password
// unlimited codes; the lock it reaches stays on "t" and is put on "p"
// too (twostep_verify.go).
//
// TTL keys hold their exact deadline in the value too: Badger expires keys
// with one-second resolution, so the TTL is rounded up to outlive the
// deadline and the deadline decides.
//
// Sequences (kv.Store.NextID): "org", "person", "machine", "group", "authsource". The
// prefixes are registered in kv/prefixes.go with every other package's,
// where a test keeps them apart.
// Device passwords (devicepw.go) take the sequence "devicepw".
const (
	pfxOrg           = kv.AccountOrg
	pfxPerson        = kv.AccountPerson
	pfxLogin         = kv.AccountLogin
	pfxOrgPerson     = kv.AccountOrgPerson
	pfxMachine       = kv.AccountMachine
	pfxGUID          = kv.AccountGUID
	pfxPersonMachine = kv.AccountPersonMachine
	pfxFail          = kv.AccountFail
	pfxLock          = kv.AccountLock
	pfxAccess        = kv.AccountAccess
	pfxRefresh       = kv.AccountRefresh
	pfxFamily        = kv.AccountFamily
	pfxPersonFamily  = kv.AccountPersonFamily
	pfxOrgChild      = kv.AccountOrgChild
	pfxCount         = kv.AccountCount
	pfxRoot          = kv.AccountRoot
	pfxOrgRoot       = kv.AccountOrgRoot
	pfxOrgGuest      = kv.AccountOrgGuest
	pfxGroup         = kv.AccountGroup
	pfxOrgGroup      = kv.AccountOrgGroup
	pfxGroupPerson   = kv.AccountGroupPerson
	pfxGroupGroup    = kv.AccountGroupGroup
	pfxPersonGroup   = kv.AccountPersonGroup
	pfxGroupParent   = kv.AccountGroupParent
	pfxLicense       = kv.AccountLicense
	pfxOrgMachine    = kv.AccountOrgMachine
	// Device passwords (devicepw.go).
	pfxDevicePassword       = kv.AccountDevicePassword
	pfxDevicePasswordHash   = kv.AccountDevicePasswordHash
	pfxPersonDevicePassword = kv.AccountPersonDevicePassword
	seqDevicePassword       = "devicepw"
	pfxTwoStep              = kv.AccountTwoStep
	pfxTwoStepNew           = kv.AccountTwoStepNew
	pfxTwoStepCode          = kv.AccountTwoStepCode
	pfxTwoStepSent          = kv.AccountTwoStepSent

	seqOrg     = "org"
	seqPerson  = "person"
	seqMachine = "machine"
	seqMapping = "mapping"
	seqGroup   = "group"
)

// Keys and sequence of directory servers (authsource.go).
const (
	pfxAuthSource       = kv.AccountAuthSource
	pfxOrgAuthSource    = kv.AccountOrgAuthSource
	pfxAuthSourcePerson = kv.AccountAuthSourcePerson
	seqAuthSource       = "authsource"
)

// Keys of machine mappings and backups (machinemap.go).
const (
	pfxMapping        = kv.AccountMapping
	pfxMachineMapping = kv.AccountMachineMapping
	pfxBackup         = kv.AccountBackup
	pfxMachineBackup  = kv.AccountMachineBackup
)

// key is prefix followed by each part as 8 big-endian bytes.
func key(prefix string, parts ...uint64) []byte { return kv.Key(prefix, parts...) }

// keyBytes is prefix followed by raw bytes (hashes, family ids, subjects).
func keyBytes(prefix string, raw []byte) []byte { return kv.KeyString(prefix, nil, string(raw)) }

func loginKey(login string) []byte { return kv.KeyString(pfxLogin, nil, foldLogin(login)) }

func guidKey(guid string) []byte { return kv.KeyString(pfxGUID, nil, strings.ToLower(guid)) }

// foldLogin is the case-insensitive form of a username or e-mail address
// used in the login index. strings.ToLower (simple Unicode folding) is
// enough for the logins people type; it is applied the same way on write
// and on lookup.
func foldLogin(s string) string { return strings.ToLower(s) }
