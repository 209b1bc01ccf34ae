package account

import (
	"sync"
	"time"
)

// maxCachedCallers bounds each map of callerCache. A caller is about a
// kilobyte, so a full cache holds a few MiB; a server with more active
// sessions than this between two writes re-reads some of them, which is
// what it did for all before the cache.
const maxCachedCallers = 4096

// callerCache keeps what Caller and AccessCaller read, so a request from a
// known login or session does not read and decode the person and
// organization records again: under a load of small GETs that was a tenth
// of the server's CPU (perf, wrk with 32 connections), and the cache
// raised the requests served by 13 to 34 percent.
//
// Entries hold only while the store has committed nothing since they were
// read (kv.Store.Generation): any write to any record drops them all. That
// keeps the cache right without knowing which writes matter (a disabled
// person or organization, a changed password, a revoked session, a new
// policy take effect at the next request) at the cost of reading again
// after each write. Token records expire without a commit, so an access
// entry also ends when its token or session would.
type callerCache struct {
	mu      sync.Mutex
	gen     uint64 // the store's generation the entries were read at
	persons map[uint64]Caller
	access  map[string]accessEntry // by token hash
}

type accessEntry struct {
	c     Caller
	until time.Time // the token's or its session's expiry, whichever is first
}

// sync drops the entries if the store moved past them, and reports
// whether they are of generation gen. The caller holds mu.
func (cc *callerCache) sync(gen uint64) bool {
	if gen > cc.gen {
		clear(cc.persons)
		clear(cc.access)
		cc.gen = gen
	}
	return gen == cc.gen
}

func (cc *callerCache) person(gen, id uint64) (Caller, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !cc.sync(gen) {
		return Caller{}, false
	}
	c, ok := cc.persons[id]
	return c, ok
}

// putPerson keeps c, read in a transaction begun at generation gen.
func (cc *callerCache) putPerson(gen, id uint64, c Caller) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !cc.sync(gen) {
		return // read before a commit the cache has seen: maybe stale
	}
	if cc.persons == nil || len(cc.persons) >= maxCachedCallers {
		cc.persons = make(map[uint64]Caller)
	}
	cc.persons[id] = c
}

func (cc *callerCache) accessCaller(gen uint64, hash []byte, now time.Time) (Caller, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !cc.sync(gen) {
		return Caller{}, false
	}
	e, ok := cc.access[string(hash)]
	if !ok || !now.Before(e.until) {
		return Caller{}, false
	}
	return e.c, true
}

// putAccess keeps c for the token of hash until until, read in a
// transaction begun at generation gen.
func (cc *callerCache) putAccess(gen uint64, hash []byte, c Caller, until time.Time) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !cc.sync(gen) {
		return
	}
	if cc.access == nil || len(cc.access) >= maxCachedCallers {
		cc.access = make(map[string]accessEntry)
	}
	cc.access[string(hash)] = accessEntry{c: c, until: until}
}
