// Package kv is berth's metadata store contract: ordered keys, serializable
// transactions, per-kind integer sequences, key expiry and a commit
// version (Generation). It names no engine and no engine's type crosses
// it, so a distributed transactional store can sit behind the same small
// interface as the embedded one.
//
// # Engines
//
// An engine is a package under kv that returns a Store: kv/badger, the
// embedded default for one node. Every engine passes the conformance
// suite kv/kvtest (kvtest.Run in the engine's own test). kv/postgres is
// the engine for several nodes, on a PostgreSQL database they share. Maintenance that
// only some engines need is reached through optional interfaces found by
// type assertion (GCer, Failer), as golang.org/x/net/webdav finds ETager;
// only daemon, which opens the engine, names the engine's package.
//
// # Transactions
//
// Store.View and Store.Update take closures. Update re-runs its closure on a
// conflict, so the closure must only read and write through its Txn. Every
// change that spans several keys (a move updates two index keys, a revision
// commit updates chunk reference counts) belongs in one Update: it happens
// whole or not at all, after a crash too. Values are CBOR
// (github.com/fxamacker/cbor/v2, fields tagged `cbor:"N,keyasint"`),
// encoded by the domain package that owns them.
//
// # Generation
//
// Store.Generation is a commit version, and caches trust it (Cache, used
// by vfs for roots and listings and by account for callers and tokens):
// an entry read at generation g is served for as long as Generation still
// returns g. An engine must therefore give it three properties:
//
//   - Every committed write transaction moves it, whichever process or
//     node committed it. A node must not answer from what it alone has
//     seen: on more than one node, Generation reads a version that every
//     node's commits move (a counter row that every write transaction
//     increments in the same transaction, or the database's own commit
//     timestamp), or a change feed the node knows to be current.
//   - It never goes back, as seen by one Store value.
//   - It moves no earlier than the commit is visible, and a call made
//     while a commit may already be visible but is not yet counted gets a
//     number no reader before it had (kv/badger hands out a fresh one).
//     Otherwise a reader that began before the commit could keep its old
//     value under the number that a reader after the commit also sees.
//
// It may move without a write (a cheaper engine may bump it on any
// doubt); that costs caches a read, never a stale answer. Keys written
// with a TTL expire without a commit, so a value derived from one carries
// its own deadline. kvtest checks what can be checked from outside: it
// moves with every commit, never back, and not past a commit unseen.
//
// An engine may also keep MetaGeneration (MetaGenerationer), with the
// same three properties for the commits that write a key outside Content:
// file writes, many a second on a busy server, leave it alone, and the
// caches of who is calling and what they reach (account's callers,
// WebDAV's sessions) key on it. kv/badger keeps it; an engine that does
// not answers Generation (kv.MetaGeneration), which is right and misses
// more.
//
// # Key layout
//
// A key is a short typed prefix followed by fixed-width fields:
//
//	<prefix><uint64><uint64>...[<string>]
//
// Every prefix in use is registered in one list, prefixes.go, by the
// package that owns it; each package's keys.go writes down the rest of its
// layout (vfs/keys.go, account/keys.go). The rules:
//
//   - A prefix is ASCII letters and ends in '/' ("R/", "acctorg/"). No
//     registered prefix is the start of another (TestPrefixesDisjoint), so
//     a scan of one kind never sees another kind. A new package takes one
//     stem of its own ("acct", "share", ...) and starts every prefix with
//     it.
//   - Integers are 8 bytes big-endian (AppendUint64, Key), without
//     separators: fixed width makes bytewise order numeric order, so a
//     prefix scan returns children by ascending id and ScanReverse by
//     descending id (newest revision first).
//   - At most one variable-length field, and it comes last (KeyString), so
//     it needs neither length nor terminator.
//   - Any leading part of a key is the prefix that lists everything below
//     it: Key("V/", file) scans every revision of file.
//   - Uint64At reads an integer field back out of a key at a known offset.
//
// Keys that start with a 0x00 byte belong to the engines (kv/badger keeps
// its sequence leases under "\x00seq/"); Badger itself reserves
// "!badger!". A scan with an empty prefix therefore also sees the
// engine's own keys.
//
// # Expiry
//
// Txn.SetTTL keys (tokens, lockout counters) vanish by themselves: an
// expired key reads as ErrNotFound and is skipped by scans, no sweeper
// runs. An engine may expire a key up to one second early (Badger's
// resolution), so a deadline that matters is also kept in the value.
package kv
