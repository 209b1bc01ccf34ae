package vfs

import (
	"context"
	"slices"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// TallyRecount recounts a tally from the store: the sum of Audit over
// every live root created with it, whether or not a test knows of the root
// (a crash right after CreateRootWith's commit leaves one it does not).
func (fs *FS) TallyRecount(ctx context.Context, tally uint64) (Usage, error) {
	var roots []uint64
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		roots = roots[:0]
		return tx.Scan([]byte(pRoot), nil, func(k, v []byte) error {
			var r rootRec
			if err := cbor.Unmarshal(v, &r); err != nil {
				return err
			}
			if !r.Deleted && slices.Contains(r.Tallies, tally) {
				roots = append(roots, r.ID)
			}
			return nil
		})
	})
	var sum usageRec
	n := int64(0)
	for _, id := range roots {
		if err != nil {
			break
		}
		var a Usage
		if a, err = fs.Audit(ctx, id); err == nil {
			n++
			sum.add(usageRec{Files: a.FileCount, HeadSize: a.HeadSize, Revisions: a.RevisionCount,
				RevisionSize: a.RevisionSize, DelFiles: a.DelFileCount, DelRevisions: a.DelRevisionCount,
				DeletedSize: a.DeletedSize, Folders: a.FolderCount})
		}
	}
	p := sum.public()
	p.RootCount = n
	return p, err
}
