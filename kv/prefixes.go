package kv

// The key prefixes of every package that keeps keys in the store, in one
// place: a package that adds keys (share, activity, ...) adds its
// prefixes here, to its own block and to Prefixes, and uses the
// constants in its keys.go. TestPrefixesDisjoint fails when a prefix is
// the start of another, which would let one kind's scan return another's
// keys. The rules are in the package documentation ("Key layout"); what
// follows each prefix is in the owner's keys.go.
//
// vfs took one capital letter each, before this list existed; later
// packages take a lowercase stem of their own ("acct") and start every
// prefix with it, so they cannot collide with the letters.

// Prefixes of vfs (vfs/keys.go).
const (
	VFSRoot    = "R/" // a root
	VFSUsage   = "U/" // a root's space accounting, in shards
	VFSQuota   = "Q/" // a root's quota check
	VFSLoc     = "N/" // where a node's record lives
	VFSTop     = "F/" // a root's top folder
	VFSChild   = "C/" // a live child, by name
	VFSDeleted = "D/" // a deleted child
	VFSTime    = "T/" // nodes by modification time
	VFSRev     = "V/" // a file's revisions
	VFSRef     = "K/" // a chunk's reference count
	VFSOrphan  = "O/" // a chunk no revision references
	VFSProp    = "P/" // dead properties
	VFSIntent  = "I/" // an operation split over transactions
	VFSGen     = "G/" // a folder's write marker
	VFSMarker  = "M/" // markers of the store as a whole (M/clean)
	VFSTally   = "Y/" // a tally's space accounting, in shards
	VFSTallyQ  = "Z/" // a tally's quota check
	VFSStaged  = "S/" // a staged (resumable) upload
	VFSPart    = "W/" // a staged upload's sealed chunks, in parts
	VFSName    = "E/" // the name index: an item's folded name
	VFSGram    = "X/" // the name index: items by trigram of their name
	VFSListSum = "H/" // a folder's listing sum, in shards (vfs/listhash.go)
	VFSLocked  = "L/" // a folder's children that hold locks, for its listing hash
	VFSHeld    = "J/" // the nodes whose uploads in flight hold a chunk
	VFSDoomed  = "B/" // a chunk a collector is removing now
	VFSOwned   = "A/" // what the staged uploads of one owner reserve, by root
	// Every capital letter is taken: later vfs prefixes take the stem "vfs".
	VFSOwnerStaged = "vfsownstaged/" // how many staged uploads one owner has in progress
	VFSPropSize    = "vfspropsize/"  // the bytes of an item's dead properties its root's usage counts
	VFSListMend    = "vfslistmend/"  // a folder's listing sum being mended, so far (vfs/listmend.go)
)

// Prefixes of account (account/keys.go).
const (
	AccountOrg           = "acctorg/"
	AccountPerson        = "acctperson/"
	AccountLogin         = "acctlogin/"
	AccountOrgPerson     = "acctorgperson/"
	AccountMachine       = "acctmachine/"
	AccountGUID          = "acctguid/"
	AccountPersonMachine = "acctpersonmachine/"
	AccountFail          = "acctfail/"
	AccountLock          = "acctlock/"
	AccountAccess        = "accttoka/"
	AccountRefresh       = "accttokr/"
	AccountFamily        = "acctfam/"
	AccountPersonFamily  = "acctpersonfam/"
	AccountOrgChild      = "acctorgchild/"
	AccountCount         = "acctcount/"
	AccountRoot          = "acctroot/"
	AccountOrgRoot       = "acctorgroot/"
	AccountOrgGuest      = "acctorgguest/"
	AccountGroup         = "acctgroup/"
	AccountOrgGroup      = "acctorggroup/"
	AccountGroupPerson   = "acctgroupperson/"
	AccountGroupGroup    = "acctgroupgroup/"
	AccountPersonGroup   = "acctpersongroup/"
	AccountGroupParent   = "acctgroupparent/"
	AccountLicense       = "acctlicense/"
	AccountOrgMachine    = "acctorgmachine/"
	// Device passwords (account/devicepw.go).
	AccountDevicePassword       = "acctdevpw/"
	AccountDevicePasswordHash   = "acctdevhash/"
	AccountPersonDevicePassword = "acctpersondevpw/"
)

// Prefixes of account's directory servers (account/authsource.go).
const (
	AccountAuthSource       = "acctauthsrc/"     // a directory server
	AccountOrgAuthSource    = "acctorgauthsrc/"  // directory servers of an organization
	AccountAuthSourcePerson = "acctsrcperson/"   // persons imported from a directory server
	AccountTwoStep          = "accttwostep/"     // a person's two-step verification (account/twostep.go)
	AccountTwoStepNew       = "accttwostepnew/"  // an enrollment waiting for its first code
	AccountTwoStepCode      = "accttwostepcode/" // an e-mail or SMS sign-in code
	AccountTwoStepSent      = "accttwostepsent/" // the e-mail and SMS enrollment codes sent lately
)

// Prefixes of account's machine mappings and backups (account/machinemap.go).
const (
	AccountMapping        = "acctmapping/" // a folder of a machine mapped to a root
	AccountMachineMapping = "acctmmap/"    // a machine's mappings
	AccountBackup         = "acctbackup/"  // a backup root and the machine folder it backs up
	AccountMachineBackup  = "acctmbak/"    // a machine's backups
)

// Prefixes of activity (activity/keys.go).
const (
	ActivityRecord = "actrec/"
	ActivityOrg    = "actorg/"
	ActivityPerson = "actperson/"
)

// Prefixes of share's organization shares (share/orgshare.go).
const (
	ShareSubscribers = "shrsubs/"    // a share root's subscribers
	SharePerson      = "shrperson/"  // the share roots a person subscribes to directly
	ShareGroup       = "shrgroup/"   // the share roots a group subscribes to
	ShareInvite      = "shrinvite/"  // an external subscriber's invitation, by token hash
	ShareRootInvite  = "shrrootinv/" // a share root's invitations, by token hash
)

// Prefixes of agentlink (agentlink/cluster.go).
const (
	AgentHolder = "agentat/" // the node that holds a machine's agent channel
)

// Prefixes of kv's own helpers (kv/lease.go).
const (
	KVLease = "kvlease/" // a cluster-wide lease on a background job
)

// Prefixes reserved below the domain packages: no domain prefix may start
// with them.
const (
	// EnginePrefix starts the keys an engine keeps for itself (kv/badger:
	// sequence leases under "\x00seq/").
	EnginePrefix = "\x00"
	// BadgerPrefix starts the keys Badger keeps in its own tree.
	BadgerPrefix = "!badger!"
)

// Prefix is one registered key prefix and the package that owns it.
type Prefix struct {
	Owner  string // the package, as imported below berth/ ("vfs")
	Prefix string // the bytes every key of Owner starts with
}

// Prefixes returns every registered prefix, for the test that keeps them
// apart and for a newcomer's overview. It returns a new slice each time.
func Prefixes() []Prefix {
	return []Prefix{
		{"kv", EnginePrefix},
		{"kv", KVLease},
		{"kv/badger", BadgerPrefix},
		{"agentlink", AgentHolder},

		{"vfs", VFSRoot},
		{"vfs", VFSUsage},
		{"vfs", VFSQuota},
		{"vfs", VFSLoc},
		{"vfs", VFSTop},
		{"vfs", VFSChild},
		{"vfs", VFSDeleted},
		{"vfs", VFSTime},
		{"vfs", VFSRev},
		{"vfs", VFSRef},
		{"vfs", VFSOrphan},
		{"vfs", VFSProp},
		{"vfs", VFSIntent},
		{"vfs", VFSGen},
		{"vfs", VFSMarker},
		{"vfs", VFSTally},
		{"vfs", VFSTallyQ},
		{"vfs", VFSStaged},
		{"vfs", VFSPart},
		{"vfs", VFSName},
		{"vfs", VFSGram},
		{"vfs", VFSListSum},
		{"vfs", VFSLocked},
		{"vfs", VFSHeld},
		{"vfs", VFSDoomed},
		{"vfs", VFSOwned},
		{"vfs", VFSOwnerStaged},
		{"vfs", VFSPropSize},
		{"vfs", VFSListMend},

		{"account", AccountOrg},
		{"account", AccountPerson},
		{"account", AccountLogin},
		{"account", AccountOrgPerson},
		{"account", AccountMachine},
		{"account", AccountGUID},
		{"account", AccountPersonMachine},
		{"account", AccountFail},
		{"account", AccountLock},
		{"account", AccountAccess},
		{"account", AccountRefresh},
		{"account", AccountFamily},
		{"account", AccountPersonFamily},
		{"account", AccountOrgChild},
		{"account", AccountCount},
		{"account", AccountRoot},
		{"account", AccountOrgRoot},
		{"account", AccountOrgGuest},
		{"account", AccountGroup},
		{"account", AccountOrgGroup},
		{"account", AccountGroupPerson},
		{"account", AccountGroupGroup},
		{"account", AccountPersonGroup},
		{"account", AccountGroupParent},
		{"account", AccountLicense},
		{"account", AccountOrgMachine},
		{"account", AccountDevicePassword},
		{"account", AccountDevicePasswordHash},
		{"account", AccountPersonDevicePassword},
		{"account", AccountAuthSource},
		{"account", AccountOrgAuthSource},
		{"account", AccountAuthSourcePerson},
		{"account", AccountTwoStep},
		{"account", AccountTwoStepNew},
		{"account", AccountTwoStepCode},
		{"account", AccountTwoStepSent},
		{"account", AccountMapping},
		{"account", AccountMachineMapping},
		{"account", AccountBackup},
		{"account", AccountMachineBackup},

		{"activity", ActivityRecord},
		{"activity", ActivityOrg},
		{"activity", ActivityPerson},

		{"share", ShareLink},
		{"share", ShareLinkHash},
		{"share", ShareLinkCreator},
		{"share", ShareLinkSubject},
		{"share", ShareSubscribers},
		{"share", SharePerson},
		{"share", ShareGroup},
		{"share", ShareInvite},
		{"share", ShareRootInvite},
	}
}

// Prefixes of share's links (share/link.go): file and folder share links
// and their subscribers. The stem is "shl", apart from organization
// shares' "shr".
const (
	ShareLink        = "shllink/"    // a link, with its subscribers and counters
	ShareLinkHash    = "shlhash/"    // a link's or a subscriber's hash: the link id
	ShareLinkCreator = "shlcreator/" // links by creator
	ShareLinkSubject = "shlsubject/" // links by subscribed person or guest
)
