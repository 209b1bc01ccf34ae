package vfs_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"berth/vfs"
)

// TestFsckUsage: fsck recounts every live root's usage from its items and
// sums each tally from its roots' ledgers (live roots', and deleted ones'
// until purged, in the trash), and names each ledger that differs, where it checked chunks, reservations and listing sums alone
// and a wrong ledger (a quota that refuses what fits, or takes what does
// not) went unseen. The sound store holds what moves every field: files
// with old revisions, a deleted file, a deleted folder with a file in it,
// a deleted root, and a chain of folders that crosses the check's batches.
func TestFsckUsage(t *testing.T) {
	const tally = 77
	for _, c := range []struct {
		name                string
		rootFiles, tallyOff int64
		goneFiles           int64 // added to the deleted root's ledger
		badRoot, badTally   bool
		nodeRoot            bool // an item's record names the deleted root
		noRecord            bool // an item's location is left without its record
	}{
		{name: "sound"},
		{name: "a root's ledger a file too many", rootFiles: 1, badRoot: true},
		{name: "a root's ledger a file short", rootFiles: -1, badRoot: true},
		{name: "a tally a file too many", tallyOff: 1, badTally: true},
		// Its usage is in its tally until it is purged: the tally no
		// longer matches.
		{name: "a deleted root's ledger a file too many", goneFiles: 1, badTally: true},
		// Before, a nil pointer: fsck crashed on the damage it is for.
		{name: "an item's record naming another root", nodeRoot: true, badRoot: true},
		// Before, fsck stopped at it with an error.
		{name: "an item's location without its record", noRecord: true, badRoot: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			r, err := e.fs.CreateRootWith(ctx, "bob", vfs.RootSync, vfs.RootOptions{Tallies: []uint64{tally}})
			if err != nil {
				t.Fatal(err)
			}
			gone, err := e.fs.CreateRootWith(ctx, "carl", vfs.RootSync, vfs.RootOptions{Tallies: []uint64{tally}})
			if err != nil {
				t.Fatal(err)
			}
			for _, root := range []vfs.Root{r, gone} {
				d, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "d", vfs.WriteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for i := range 3 {
					for v := range i + 1 { // revisions
						if _, err := e.fs.WriteFile(ctx, root.ID, d.ID, fmt.Sprintf("f%d", i), bytes.NewReader(bytes.Repeat([]byte{byte(v)}, 100*(i+1)+v)), vfs.WriteOptions{}); err != nil {
							t.Fatal(err)
						}
					}
				}
				f, err := e.fs.WriteFile(ctx, root.ID, root.FolderID, "del.txt", strings.NewReader("deleted"), vfs.WriteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := e.fs.Delete(ctx, root.ID, f.ID, vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := e.fs.Delete(ctx, root.ID, d.ID, vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := e.fs.WriteFile(ctx, root.ID, root.FolderID, "kept.txt", strings.NewReader("kept"), vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.fs.DeleteRoot(ctx, gone.ID); err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				if _, err := e.fs.MkdirChain(ctx, r.ID, r.FolderID, fmt.Sprint("chain", i), 300); err != nil {
					t.Fatal(err)
				}
			}
			if c.rootFiles != 0 {
				if err := e.fs.DamageUsage(ctx, r.ID, c.rootFiles); err != nil {
					t.Fatal(err)
				}
			}
			if c.nodeRoot || c.noRecord {
				kept, err := e.fs.Lookup(ctx, r.ID, "/kept.txt")
				if err != nil {
					t.Fatal(err)
				}
				damage := func() error { return e.fs.DamageNodeRoot(ctx, kept.ID, gone.ID) }
				if c.noRecord {
					damage = func() error { return e.fs.DropNodeRecord(ctx, kept.ID) }
				}
				if err := damage(); err != nil {
					t.Fatal(err)
				}
			}
			if c.goneFiles != 0 {
				if err := e.fs.DamageUsage(ctx, gone.ID, c.goneFiles); err != nil {
					t.Fatal(err)
				}
			}
			if c.tallyOff != 0 {
				if err := e.fs.DamageTally(ctx, tally, c.tallyOff); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := e.fs.Fsck(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			// A root's ledger damaged alone leaves its tally wrong too:
			// the tally is the sum of the ledgers, not of a recount.
			var wantRoots, wantTallies []uint64
			if c.badRoot {
				wantRoots = []uint64{r.ID}
			}
			if c.rootFiles != 0 {
				wantTallies = []uint64{tally}
			}
			if c.badTally {
				wantTallies = []uint64{tally}
			}
			if !slices.Equal(rep.BadUsage, wantRoots) || !slices.Equal(rep.BadTallies, wantTallies) || rep.OK() != (wantRoots == nil && wantTallies == nil) {
				t.Fatalf("bad usage %v, bad tallies %v (OK %v), want %v and %v: %s", rep.BadUsage, rep.BadTallies, rep.OK(), wantRoots, wantTallies, rep)
			}
			if c.badRoot && !strings.Contains(rep.String(), "1 bad usage ledgers") {
				t.Errorf("report %q does not count the bad ledger", rep)
			}
		})
	}
}
