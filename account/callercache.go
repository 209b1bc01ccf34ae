package account

import (
	"net/netip"
	"time"

	"berth/kv"
)

// maxCachedCallers bounds each cache of callers. A caller is about a
// kilobyte, so a full cache holds a few MiB; a server with more active
// sessions than this between two writes re-reads some of them, which is
// what it did for all before the cache.
const maxCachedCallers = 4096

// callerCache keeps what Caller, LoginCallerRef and AccessCaller read, so a
// request from a known login or session does not read and decode the
// person and organization records again: under a load of small GETs that
// was a tenth of the server's CPU (perf, wrk with 32 connections). Entries
// hold until the store's next commit (kv.Cache), so a disabled person or
// organization, a changed password, a revoked session, a failed-login lock
// or a new policy take effect at the next request. Token records expire
// without a commit, so an access entry also ends when its token or
// session would.
type callerCache struct {
	persons *kv.Cache[uint64, Caller]
	logins  *kv.Cache[callerAt, *Caller]   // persons whose logins were not locked, by client network; shared (LoginCallerRef)
	access  *kv.Cache[string, accessEntry] // by token hash
	roots   *kv.Cache[uint64, RootPlace]   // RootPlaceOf
	owners  *kv.Cache[uint64, RootOwner]   // RootOwnerOf, by kv.MetaGeneration
	orgs    *kv.Cache[uint64, OrgPlace]    // OrgPlaceOf
	devices *kv.Cache[string, *Caller]     // DeviceCallerRef, by device password hash; shared
	twoStep *kv.Cache[uint64, bool]        // NeedsDevicePassword's TwoStepMode, by person
	groups  *kv.Cache[uint64, []uint64]    // PersonGroups, by person, by kv.MetaGeneration; shared
}

// callerAt keys LoginCallerRef's answers: a person as a request from
// network net meets their locks (passwordLock), which depend on the
// address only through the network the lockout counts it as (AddrNet).
type callerAt struct {
	person uint64
	net    netip.Addr
}

func newCallerCache() callerCache {
	return callerCache{
		persons: kv.NewCache[uint64, Caller](maxCachedCallers),
		logins:  kv.NewCache[callerAt, *Caller](maxCachedCallers),
		access:  kv.NewCache[string, accessEntry](maxCachedCallers),
		roots:   kv.NewCache[uint64, RootPlace](maxCachedCallers),
		owners:  kv.NewCache[uint64, RootOwner](maxCachedCallers),
		orgs:    kv.NewCache[uint64, OrgPlace](maxCachedCallers),
		devices: kv.NewCache[string, *Caller](maxCachedCallers),
		twoStep: kv.NewCache[uint64, bool](maxCachedCallers),
		groups:  kv.NewCache[uint64, []uint64](maxCachedCallers),
	}
}

type accessEntry struct {
	// c is shared by every request of the token until the entry goes
	// (AccessCallerRef): nothing may change it once it is cached.
	c     *Caller
	until time.Time // the token's or its session's expiry, whichever is first
}
