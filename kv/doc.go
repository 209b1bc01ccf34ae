// Package kv is berth's metadata store: ordered keys, serializable
// transactions, per-kind integer sequences and key expiry. It hides the
// engine (Badger today, see OpenBadger) so that a distributed transactional
// store can sit behind the same small interface later; no engine type
// crosses this API.
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
// # Key layout
//
// A key is a short typed prefix followed by fixed-width fields:
//
//	<name>/<uint64><uint64>...[<string>]
//
// The rules:
//
//   - The prefix is a lowercase ASCII name and a '/' ("node/", "child/",
//     "rev/", "chunkref/"). Names contain no '/', so no prefix is the start
//     of another and a scan of one kind never sees another kind.
//   - Integers are 8 bytes big-endian (AppendUint64, Key), without
//     separators: fixed width makes bytewise order numeric order, so a
//     prefix scan returns children by ascending id and ScanReverse by
//     descending id (newest revision first).
//   - At most one variable-length field, and it comes last (KeyString), so
//     it needs neither length nor terminator.
//   - Any leading part of a key is the prefix that lists everything below
//     it: Key("rev/", file) scans every revision of file.
//   - Uint64At reads an integer field back out of a key at a known offset.
//
// Each domain package writes its layout down in one file (vfs/keys.go,
// account/keys.go). Keys that start with a 0x00 byte belong to this package
// (sequence leases live under "\x00seq/"); Badger itself reserves
// "!badger!". A scan with an empty prefix therefore also sees kv's own keys.
//
// # Expiry
//
// Txn.SetTTL keys (tokens, lockout counters) vanish by themselves: an
// expired key reads as ErrNotFound and is skipped by scans, no sweeper
// runs. Badger's expiry has a resolution of one second.
package kv
