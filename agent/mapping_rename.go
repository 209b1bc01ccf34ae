package agent

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"
)

// renames finds files renamed or moved on one side since the last
// cycle and renames them on the other, so that a rename costs one
// request or one rename(2) instead of sending the file again. A rename
// shows as a path gone and a new one: there, the new path's item has the
// id and revision the index keeps for the old path; here, the new path
// has the size and modification time the index keeps for the old one
// (rename keeps both), matched only when exactly one candidate fits.
// Anything not matched is left to reconcile, which copies and deletes:
// slower, never wrong.
func (s *syncer) renames(ctx context.Context) (ops int, firstErr error) {
	byRID := map[uint64]string{}
	type stat struct{ size, mtime int64 }
	byStat := map[stat][]string{}
	for p, e := range s.ix.Entries {
		if e.Dir {
			continue
		}
		byRID[e.RID] = p
		byStat[stat{e.Size, e.Mtime}] = append(byStat[stat{e.Size, e.Mtime}], p)
	}
	// Renamed there: rename here.
	for p, R := range s.rv {
		if R.dir() || s.ix.Entries[p] != nil || s.excludedBelow(p) {
			continue
		}
		if _, ok := s.local.items[p]; ok {
			continue
		}
		q, ok := byRID[R.ID]
		if !ok || q == p {
			continue
		}
		I := s.ix.Entries[q]
		if I == nil || I.RRev != R.Rev {
			continue
		}
		if old, ok := s.rv[q]; ok && old.ID == R.ID {
			continue
		}
		L, ok := s.local.items[q]
		if !ok || L.Dir || L.Size != I.Size || L.Mtime != I.Mtime {
			continue
		}
		if err := os.MkdirAll(s.local.abs(relParent(p)), 0o755); err != nil {
			firstErr = cmp(firstErr, err)
			continue
		}
		if _, err := os.Lstat(s.local.abs(p)); err == nil {
			continue
		}
		if err := os.Rename(s.local.abs(q), s.local.abs(p)); err != nil {
			firstErr = cmp(firstErr, err)
			continue
		}
		for d := relParent(p); d != ""; d = relParent(d) {
			if _, ok := s.local.items[d]; ok {
				break
			}
			s.local.items[d] = localItem{Dir: true}
		}
		delete(s.local.items, q)
		s.unindex(q)
		delete(byRID, R.ID)
		if now, ok := s.local.stat(p); ok {
			s.local.items[p] = now
			s.record(p, now, R)
		}
		s.log.Debug("renamed here as there", "from", q, "to", p)
		ops++
	}
	// Renamed here: rename there.
	for p, L := range s.local.items {
		if L.Dir || s.ix.Entries[p] != nil || s.excludedBelow(p) {
			continue
		}
		if _, ok := s.rv[p]; ok {
			continue
		}
		cands := byStat[stat{L.Size, L.Mtime}]
		if len(cands) != 1 {
			continue
		}
		q := cands[0]
		I := s.ix.Entries[q]
		if I == nil {
			continue
		}
		if _, ok := s.local.items[q]; ok {
			continue // a copy, not a rename
		}
		R, ok := s.rv[q]
		if !ok || R.ID != I.RID || R.Rev != I.RRev {
			continue
		}
		to, err := s.ensureRemoteDir(ctx, relParent(p))
		if err != nil {
			firstErr = cmp(firstErr, err)
			continue
		}
		moved, err := s.remote.move(ctx, R, s.remoteParent(q), to, path.Base(p))
		if err != nil {
			firstErr = cmp(firstErr, fmt.Errorf("moving %s to %s in the root: %w", q, p, err))
			continue
		}
		delete(s.rv, q)
		s.unindex(q)
		delete(byStat, stat{L.Size, L.Mtime})
		s.rv[p] = moved
		s.record(p, L, moved)
		s.log.Debug("renamed there as here", "from", q, "to", p)
		ops++
	}
	return ops, firstErr
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// deleteRemoteTree deletes the root's folder p in one request when it
// was deleted here and nothing below it changed there since it was last
// in step (so only what the index knows goes to the trash); true when it
// did.
func (s *syncer) deleteRemoteTree(ctx context.Context, p string) (bool, error) {
	pre := p + "/"
	for q, R := range s.rv {
		if !strings.HasPrefix(q, pre) {
			continue
		}
		I := s.ix.Entries[q]
		if I == nil || I.RID != R.ID || (!R.dir() && I.RRev != R.Rev) {
			return false, nil
		}
		if _, ok := s.local.items[q]; ok {
			return false, nil
		}
	}
	for q := range s.local.items {
		if strings.HasPrefix(q, pre) {
			return false, nil
		}
	}
	if err := s.deleteRemote(ctx, p, s.rv[p]); err != nil {
		return false, err
	}
	for q := range s.rv {
		if strings.HasPrefix(q, pre) {
			delete(s.rv, q)
			s.unindex(q)
		}
	}
	return true, nil
}
