package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
	"berth/vfs"
)

// txJournal writes each event into the transaction it is given, under
// keys of its own, so a test can read back what committed with the
// changes; failOn makes it refuse one operation.
type txJournal struct {
	n      atomic.Uint64
	failOn vfs.Op
}

var errJournal = errors.New("journal refused")

const journalPrefix = "zjournal/"

type journalled struct {
	Op      vfs.Op
	Root    uint64
	Node    uint64
	Name    string
	Actor   string
	Created bool
}

func (j *txJournal) Record(ctx context.Context, tx kv.Txn, ev vfs.Event) error {
	if ev.Op == j.failOn {
		return errJournal
	}
	actor, _ := ev.Actor.(string)
	v, err := cbor.Marshal(journalled{ev.Op, ev.RootID, ev.NodeID, ev.Name, actor, ev.Created})
	if err != nil {
		return err
	}
	return tx.Set(fmt.Appendf(nil, "%s%020d", journalPrefix, j.n.Add(1)), v)
}

func readJournal(t *testing.T, db kv.Store) []journalled {
	t.Helper()
	var out []journalled
	err := db.View(context.Background(), func(tx kv.Txn) error {
		return tx.Scan([]byte(journalPrefix), nil, func(_, v []byte) error {
			var j journalled
			if err := cbor.Unmarshal(v, &j); err != nil {
				return err
			}
			out = append(out, j)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestJournalOneRecordPerChange: every change leaves exactly one record,
// written in its own transaction, so it is there after the store is
// reopened without a clean close.
func TestJournalOneRecordPerChange(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	j := &txJournal{}
	e := openEnvWith(t, dir, vfs.Options{Journal: j})
	opts := vfs.WriteOptions{Actor: "alice"}
	root, err := e.fs.CreateRoot(ctx, "r", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	top := root.FolderID
	dir1, err := e.fs.Mkdir(ctx, root.ID, top, "docs", opts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.fs.WriteFile(ctx, root.ID, top, "a.txt", bytes.NewReader([]byte("one")), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.WriteFile(ctx, root.ID, top, "a.txt", bytes.NewReader([]byte("two")), opts); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Rename(ctx, root.ID, f.ID, "b.txt", opts); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Move(ctx, root.ID, f.ID, dir1.ID, "", opts); err != nil {
		t.Fatal(err)
	}
	c, err := e.fs.Copy(ctx, root.ID, f.ID, root.ID, top, "c.txt", opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.fs.Lock(ctx, root.ID, c.ID, vfs.LockRequest{Holder: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Unlock(ctx, root.ID, c.ID, l.Token); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Delete(ctx, root.ID, c.ID, opts); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Purge(ctx, root.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.DeleteRoot(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	want := []journalled{
		{vfs.OpCreateRoot, root.ID, top, "r", "", false},
		{vfs.OpMkdir, root.ID, dir1.ID, "docs", "alice", false},
		{vfs.OpWrite, root.ID, f.ID, "a.txt", "alice", true},
		{vfs.OpWrite, root.ID, f.ID, "a.txt", "alice", false},
		{vfs.OpRename, root.ID, f.ID, "b.txt", "alice", false},
		{vfs.OpMove, root.ID, f.ID, "b.txt", "alice", false},
		{vfs.OpCopy, root.ID, c.ID, "c.txt", "alice", false},
		{vfs.OpLock, root.ID, c.ID, "c.txt", "", false},
		{vfs.OpUnlock, root.ID, c.ID, "c.txt", "", false},
		{vfs.OpDelete, root.ID, c.ID, "c.txt", "alice", false},
		{vfs.OpPurge, root.ID, c.ID, "c.txt", "", false}, // named: TestPurgeActivity (daemon)
		{vfs.OpDeleteRoot, root.ID, 0, "r", "", false},
	}
	// Reopened without Close: what committed is there, records and all.
	e.db.Close()
	db := openBadger(t, dir+"/meta", false)
	defer db.Close()
	got := readJournal(t, db)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("journal:\n got %v\nwant %v", got, want)
	}
}

// TestJournalRefusalAbortsChange: the record and the change are one
// transaction, so a journal that cannot record refuses the change.
func TestJournalRefusalAbortsChange(t *testing.T) {
	ctx := context.Background()
	for _, op := range []vfs.Op{vfs.OpMkdir, vfs.OpWrite, vfs.OpDelete} {
		t.Run(string(op), func(t *testing.T) {
			j := &txJournal{failOn: op}
			e := openEnvWith(t, t.TempDir(), vfs.Options{Journal: j})
			t.Cleanup(e.close)
			root, err := e.fs.CreateRoot(ctx, "r", vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			var n vfs.Node
			if op == vfs.OpDelete {
				if n, err = e.fs.Mkdir(ctx, root.ID, root.FolderID, "x", vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			switch op {
			case vfs.OpMkdir:
				_, err = e.fs.Mkdir(ctx, root.ID, root.FolderID, "x", vfs.WriteOptions{})
			case vfs.OpWrite:
				_, err = e.fs.WriteFile(ctx, root.ID, root.FolderID, "x", bytes.NewReader([]byte("data")), vfs.WriteOptions{})
			case vfs.OpDelete:
				err = e.fs.Delete(ctx, root.ID, n.ID, vfs.WriteOptions{})
			}
			if !errors.Is(err, errJournal) {
				t.Fatalf("%s: err = %v, want the journal's", op, err)
			}
			_, err = e.fs.Lookup(ctx, root.ID, "/x")
			if wantGone := op != vfs.OpDelete; wantGone != errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("%s refused by the journal, yet it happened (lookup: %v)", op, err)
			}
		})
	}
}
