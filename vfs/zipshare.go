package vfs

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
)

// zipShares is what the layouts of the zips being served hold of the
// budget, in all, by requester and by group, and the layouts that
// requests for the same archive share.
//
// A layout's bytes are memory once, however many requests read it: total
// counts each layout once. A requester (and a group) is charged the whole
// size of every layout that one of its requests holds, once however many
// of its requests hold it: what a requester holds is what would stay in
// memory for it if every other requester's request ended. The rule of
// ZipBudget (a requester holds at most half of what the layouts it holds
// no part of leave) is checked when a requester first holds a layout,
// whether it lays the layout out or joins one that another laid out.
// Charged to the first requester only, a requester who joined the
// layouts others laid out and read them slowly kept them in memory
// after their own requests had ended, charged to those others or to no
// one: all but nothing of the budget held, not a byte of it its own.
type zipShares struct {
	budget int64
	mu     sync.Mutex
	total  int64
	by     map[string]int64 // requesters that hold some
	groups map[string]int64 // groups that hold some
	// layouts are the newest layout of each archive, to share: laid
	// out, or being laid out (zipShareState.ready not closed yet).
	layouts map[zipKey]*zipLayout
	// onHeld is Options.ZipHeld; told is the total it was last told.
	onHeld func(int64)
	told   int64
}

// tell tells onHeld the total if it moved. The caller holds mu, so the
// totals are told in the order they were reached.
func (s *zipShares) tell() {
	if s.onHeld != nil && s.total != s.told {
		s.told = s.total
		s.onHeld(s.total)
	}
}

// zipKey names an archive but for the state of its folder: the root,
// the folder and the entries chosen (pickKey). The state is
// zipShareState.gen.
type zipKey struct {
	root, folder uint64
	pick         string
}

// pickKey is opts's choice of entries as a key: the ids of the files and
// of the folders chosen, sorted and without repeats, apart; empty for
// the whole folder.
func pickKey(opts ZipOptions) string {
	if len(opts.FileIDs)+len(opts.FolderIDs) == 0 {
		return ""
	}
	b := make([]byte, 0, 8*(len(opts.FileIDs)+len(opts.FolderIDs)+1))
	for _, ids := range [][]uint64{opts.FileIDs, opts.FolderIDs} {
		ids = slices.Compact(slices.Sorted(slices.Values(ids)))
		b = binary.BigEndian.AppendUint64(b, uint64(len(ids)))
		for _, id := range ids {
			b = binary.BigEndian.AppendUint64(b, id)
		}
	}
	return string(b)
}

// zipShareState is what zipShares keeps of a layout, under its mu.
type zipShareState struct {
	key zipKey
	// gen is the store's Generation read before the layout's snapshot
	// began: while Generation is still gen, no commit has landed since,
	// and the layout is the folder's as it is.
	gen uint64
	// ready is closed once the layout is laid out or failed.
	ready chan struct{}
	laid  bool
	// prev is the layout of the same key that this one was made to
	// replace, held when it was made (nil once laid out): if the
	// folder's listing is still prev's, this one is dropped for it.
	prev *zipLayout
	// bytes are what the layout holds of the budget; refs the Zips of
	// it open; uses how many of them each requester (uses[0]) and each
	// group (uses[1]) holds.
	bytes int64
	refs  int
	uses  [2]map[string]int
}

// zipShare is one of the shares a layout counts in: key's in of.
type zipShare struct {
	of         map[string]int64
	key, whose string
}

// shares are the two shares who's layouts count in, each held to half
// of what the others leave: its requester's and its group's. The caller
// holds mu.
func (s *zipShares) shares(who zipHolder) [2]zipShare {
	if s.by == nil {
		s.by, s.groups = make(map[string]int64), make(map[string]int64)
	}
	return [2]zipShare{
		{s.by, who.requester, "this requester's zips"},
		{s.groups, who.group, "the zips of this requester's group (the share links of one person)"},
	}
}

// find returns a Zip of the layout of key for who, if one laid out at
// gen or later is there and who's share lets who hold it; or what to
// wait for, if one is being laid out (at whatever generation: one layout
// of an archive at a time, and the requests that waited look again once
// it is done); or a new layout for who to lay out (layOut), which later
// requests of key wait for. ErrBusy: who's share does not let it hold
// the layout.
//
// A new layout made where one laid out earlier is held (prev) first
// checks whether the folder's listing is still that one's (layOut,
// zipLayout.matches), which holds no memory. Generation moves with
// every commit (the count of a share link's download, a login), so the
// next segment of a download fetched in parallel often finds the store
// moved: laid out afresh to be compared, that second copy of a layout
// of more than a quarter of the budget was refused (ErrBusy) as it
// grew, and laid out on credit of the first, one requester's copies
// in the making could hold all the others' quarter.
func (s *zipShares) find(key zipKey, gen uint64, who zipHolder) (*Zip, <-chan struct{}, *zipLayout, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.layouts[key]
	switch {
	case cur != nil && !cur.share.laid:
		return nil, cur.share.ready, nil, nil
	case cur != nil && cur.share.gen >= gen:
		if err := s.join(cur, who); err != nil {
			return nil, nil, nil, err
		}
		return &Zip{zipLayout: cur, who: who}, nil, nil, nil
	}
	l := &zipLayout{root: key.root, builder: who}
	l.share = zipShareState{key: key, gen: gen, ready: make(chan struct{}), prev: cur}
	if s.layouts == nil {
		s.layouts = make(map[zipKey]*zipLayout)
	}
	s.layouts[key] = l
	s.hold(l, who)
	return nil, nil, l, nil
}

// grow takes n more bytes of the budget for the entries of l, being laid
// out by l.builder, its only holder yet: at most half of what the other
// requesters leave may be the builder's requester's, and at most half of
// what the other groups leave may be its group's. A layout whose own
// entries pass half the budget is ErrZipTooLarge: it would be ErrBusy
// however long its client waited.
func (s *zipShares) grow(l *zipLayout, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.share.bytes+n > s.budget/2 {
		return fmt.Errorf("%w: its entries' names take more than %d bytes together, half the zips' budget", ErrZipTooLarge, s.budget/2)
	}
	shares := s.shares(l.builder)
	if err := s.fits(shares, n); err != nil {
		return err
	}
	for _, sh := range shares {
		sh.of[sh.key] += n
	}
	s.total += n
	l.share.bytes += n
	s.tell()
	return nil
}

// fits checks that shares may hold n more bytes of a layout being laid
// out: at most half of what the others' layouts leave.
func (s *zipShares) fits(shares [2]zipShare, n int64) error {
	for _, sh := range shares {
		held := sh.of[sh.key]
		if held+n > fairShare(s.budget, s.total, held) {
			others := s.total - held
			return fmt.Errorf("%w: %s hold %d bytes of layout, and may hold at most half of the %d that the zips of others leave free", ErrBusy, sh.whose, held, s.budget-others)
		}
	}
	return nil
}

// join makes who a holder of l, laid out: charged its whole size unless
// who (its requester, its group) holds it already, and then held to the
// same rule as grow, with l counted among the layouts who holds, no
// longer among the others'.
func (s *zipShares) join(l *zipLayout, who zipHolder) error {
	n := l.share.bytes
	for i, sh := range s.shares(who) {
		if l.share.uses[i][sh.key] > 0 {
			continue
		}
		held := sh.of[sh.key]
		// l counts among who's layouts now, not the others'.
		if held+n > fairShare(s.budget, s.total, held+n) {
			others := s.total - held - n
			return fmt.Errorf("%w: %s hold %d bytes of layout, and may hold at most half of the %d that the zips of others leave free, where this one's layout holds %d", ErrBusy, sh.whose, held, s.budget-others, n)
		}
	}
	s.hold(l, who)
	return nil
}

// hold counts one more Zip of l held by who, charging who what l holds
// where it held none of it. The caller holds mu and has checked who's
// shares.
func (s *zipShares) hold(l *zipLayout, who zipHolder) {
	if l.share.refs == 0 {
		s.total += l.share.bytes
		s.tell()
	}
	l.share.refs++
	for i, sh := range s.shares(who) {
		if l.share.uses[i] == nil {
			l.share.uses[i] = make(map[string]int)
		}
		if l.share.uses[i][sh.key]++; l.share.uses[i][sh.key] == 1 {
			sh.of[sh.key] += l.share.bytes
		}
	}
}

// release gives back one Zip of l held by who: who's share of l when it
// was who's last, and l's bytes and its place among the layouts shared
// when it was the last of all.
func (s *zipShares) release(l *zipLayout, who zipHolder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unhold(l, who)
}

// unhold is release with mu held.
func (s *zipShares) unhold(l *zipLayout, who zipHolder) {
	for i, sh := range s.shares(who) {
		if l.share.uses[i][sh.key]--; l.share.uses[i][sh.key] > 0 {
			continue
		}
		delete(l.share.uses[i], sh.key)
		if sh.of[sh.key] -= l.share.bytes; sh.of[sh.key] == 0 {
			delete(sh.of, sh.key)
		}
	}
	if l.share.refs--; l.share.refs == 0 {
		s.total -= l.share.bytes
		s.tell()
		if s.layouts[l.share.key] == l {
			delete(s.layouts, l.share.key)
		}
	}
}

// laidOut shares l, laid out by l.builder, and returns the builder's
// Zip of it.
func (s *zipShares) laidOut(l *zipLayout) *Zip {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.share.prev = nil
	l.share.laid = true
	s.layouts[l.share.key] = l
	close(l.share.ready)
	return &Zip{zipLayout: l, who: l.builder}
}

// reuse drops l, made to replace prev, whose listing was found to be
// still prev's at l's generation: prev then stands for the archive at
// that generation, and l's builder joins it (ErrBusy where its share
// does not let it).
func (s *zipShares) reuse(l, prev *zipLayout) (*Zip, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(l.share.ready)
	l.share.prev = nil
	s.unhold(l, l.builder) // it holds nothing yet; forgotten
	if err := s.join(prev, l.builder); err != nil {
		if prev.share.refs > 0 {
			s.layouts[l.share.key] = prev
		}
		return nil, err
	}
	prev.share.gen = max(prev.share.gen, l.share.gen)
	s.layouts[l.share.key] = prev
	return &Zip{zipLayout: prev, who: l.builder}, nil
}

// failed gives back what l held, which failed to be laid out, puts back
// the layout it was to replace, and lets those who wait for it look
// again.
func (s *zipShares) failed(l *zipLayout) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail(l)
}

// fail is failed with mu held.
func (s *zipShares) fail(l *zipLayout) {
	prev := l.share.prev
	l.share.prev = nil
	s.unhold(l, l.builder) // its last holder: it is forgotten
	if prev != nil && prev.share.refs > 0 {
		s.layouts[l.share.key] = prev
	}
	close(l.share.ready)
}
