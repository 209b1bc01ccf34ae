package activity

import "berth/kv"

// Key layout of the activity log, following kv's rules (kv package doc).
// Values are CBOR (Record's own encoding). Every key is written with the
// configured retention as its TTL (Options.Retention; none when 0), so old
// records and their index entries vanish together without a sweeper.
//
//	key                                 value    TTL
//	actrec/<id>                         Record   retention
//	actorg/<organization><^id>          empty    retention   records of an organization, newest first
//	actperson/<person><^id>             empty    retention   records of a person or guest, newest first
//
// <^id> is the bitwise complement of the record's id: ids grow with time,
// so their complements sort newest first and a page of the newest records
// is a forward prefix scan from the start. A record is indexed under the
// actor's and the acted-on organization, and under the actor's and the
// acted-on person or guest, each once.
//
// Sequence (kv.NextOrderedID): "activity", taken outside the transaction
// that writes the record (a retried or failed transaction skips an id;
// ids never repeat), in the order asked for across nodes, so that ids
// grow with time on several nodes too (kv.Store.NextID's leases would
// interleave: TestTwoNodesActivityOrder).
const (
	pfxRecord = kv.ActivityRecord
	pfxOrg    = kv.ActivityOrg
	pfxPerson = kv.ActivityPerson

	sequence = "activity"
)

func recordKey(id uint64) []byte { return kv.Key(pfxRecord, id) }

func orgKey(org, id uint64) []byte { return kv.Key(pfxOrg, org, ^id) }

func personKey(person, id uint64) []byte { return kv.Key(pfxPerson, person, ^id) }

// idOf returns the record id of an index key under a prefix of n bytes
// followed by the owner's 8.
func idOf(key []byte, n int) uint64 { return ^kv.Uint64At(key, n+8) }
