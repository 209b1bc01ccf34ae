package vfs

import (
	"context"
	"errors"
	"fmt"

	"berth/kv"
)

// errRolledBack ends ReadsInOneWrite's transaction without committing it.
var errRolledBack = errors.New("rolled back")

// ReadsInOneWrite reads the item id and its root in one write
// transaction, as the checks of a write do, with changes between the
// reads, and returns an error naming the first read that did not see
// what the transaction holds by then. Nothing is committed.
func (fs *FS) ReadsInOneWrite(ctx context.Context, root, id uint64) error {
	err := fs.db.Update(ctx, func(tx kv.Txn) error {
		rec, loc, err := nodeIn(tx, root, id)
		if err != nil {
			return err
		}
		// A change of the record this transaction makes: the next read
		// sees it.
		rec.Locks = append(rec.Locks, lockRec{Token: "t1", Created: 1, Expires: 1 << 62})
		if err := saveNode(tx, rec, loc); err != nil {
			return err
		}
		again, _, err := loadNode(tx, id)
		if err != nil {
			return err
		}
		if len(again.Locks) != 1 || again.Locks[0].Token != "t1" {
			return fmt.Errorf("read after a write of the record: locks %v, want t1", again.Locks)
		}
		// A change of what a read returned, in place, as lock.go
		// refreshes a lock: not what the transaction holds.
		again.Locks[0].Expires = 5
		third, _, err := loadNode(tx, id)
		if err != nil {
			return err
		}
		if third.Locks[0].Expires != 1<<62 {
			return fmt.Errorf("a caller's change of a read record's locks reached the next read: expires %d", third.Locks[0].Expires)
		}
		// The same of a record read a second time.
		third.Locks[0].Expires = 6
		if fourth, _, err := loadNode(tx, id); err != nil || fourth.Locks[0].Expires != 1<<62 {
			return fmt.Errorf("a caller's change of a record read again reached the next read: %v, %v", fourth.Locks, err)
		}
		// The root deleted in this transaction: the next check of it
		// refuses.
		r, err := loadRoot(tx, root)
		if err != nil {
			return err
		}
		r.Deleted = true
		if err := put(tx, rootKey(root), r); err != nil {
			return err
		}
		if _, _, err := nodeIn(tx, root, id); !errors.Is(err, ErrRootDeleted) {
			return fmt.Errorf("read of a root deleted in the transaction: %v, want ErrRootDeleted", err)
		}
		// The item moved away in this transaction: its old record is
		// gone, and its location says where it went.
		if err := tx.Delete(recKey(id, loc)); err != nil {
			return err
		}
		moved := loc
		moved.Name = rec.Name + ".moved"
		if err := put(tx, locKey(id), moved); err != nil {
			return err
		}
		if err := put(tx, recKey(id, moved), rec); err != nil {
			return err
		}
		if _, l, err := loadNode(tx, id); err != nil || l.Name != moved.Name {
			return fmt.Errorf("read of an item moved in the transaction: at %q (%v), want %q", l.Name, err, moved.Name)
		}
		return errRolledBack
	})
	if errors.Is(err, errRolledBack) {
		return nil
	}
	return err
}
