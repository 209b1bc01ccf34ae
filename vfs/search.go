package vfs

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"berth/kv"
)

// Search returns the live items of a root whose name contains query,
// ignoring case, with their paths; at most limit of them (0: no limit).
// It is SearchAfter's first page: a query of one or two runes reads at
// most ShortQueryScan names.
func (fs *FS) Search(ctx context.Context, root uint64, query string, limit int) ([]Node, error) {
	ns, _, err := fs.SearchAfter(ctx, root, query, 0, limit)
	return ns, err
}

// ShortQueryScan is the most names of a root that one search for a query
// of one or two runes reads (see SearchAfter).
const ShortQueryScan = 100_000

// SearchAfter returns the live items of a root whose name contains query
// under Unicode simple case folding (see fold), in the order of their ids
// (the order they were created in), those with an id above after only: at
// most limit of them (0: no limit), with their paths. next, when not 0, is
// the after of the following page: the last id returned when the page is
// full, or for a query of one or two runes the last id read when the page
// stopped at ShortQueryScan names read. next 0 says there is no more.
//
// A query of three runes or more reads one list of the name index (the
// shortest of its trigrams'), so its cost follows how common the query's
// rarest trigram is, not the root's size; a shorter one reads the root's
// names in id order until it has limit results or ShortQueryScan names.
// Deleted items, and items of a deleted folder, are never returned.
func (fs *FS) SearchAfter(ctx context.Context, root uint64, query string, after uint64, limit int) (nodes []Node, next uint64, err error) {
	qs := queryForms(query)
	q := qs[0] // the shortest
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		nodes, next = nodes[:0], 0
		r, err := loadRoot(tx, root)
		if err != nil {
			return err
		}
		s := searcher{tx: tx, root: root, q: q, qs: qs, limit: limit, now: fs.nowNs(), scanMax: fs.shortScan}
		if s.scanMax <= 0 {
			s.scanMax = ShortQueryScan
		}
		switch {
		// A name holds at most MaxNameBytes runes, so a longer query
		// matches nothing; its trigrams were each a scan of the index
		// (60,000 runes: 0.43 s on a root of 250 names).
		case after == math.MaxUint64 || q == "" || utf8.RuneCountInString(q) > MaxNameBytes:
			return nil
		case !r.Indexed:
			err = s.scanAll(ctx, after)
		case utf8.RuneCountInString(q) >= gramRunes:
			err = s.byGrams(ctx, after)
		default:
			err = s.byName(ctx, after)
		}
		nodes, next = s.out, s.next
		return err
	})
	return nodes, next, err
}

// queryForms are the folded forms of query that a name may hold it in:
// as sent, in NFC and in NFD, each once, the shortest first. Names are
// stored as sent (docs/api.md, Unicode normalization), and every keyboard
// types NFC while macOS's WebDAV client names what it writes in NFD: a
// search for "café" typed anywhere found none of the files Finder had
// written.
func queryForms(query string) []string {
	qs := []string{fold(norm.NFC.String(query))}
	for _, f := range []string{fold(query), fold(norm.NFD.String(query))} {
		if !slices.Contains(qs, f) {
			qs = append(qs, f)
		}
	}
	return qs
}

// byGrams is byGram for each of the query's forms, the pages merged:
// each form's page holds the first limit items of its own matches, so
// the first limit of their union by id are among them.
func (s *searcher) byGrams(ctx context.Context, after uint64) error {
	if len(s.qs) == 1 {
		return s.byGram(ctx, after)
	}
	var all []Node
	for _, q := range s.qs {
		s.q, s.out, s.next = q, nil, 0
		if err := s.byGram(ctx, after); err != nil {
			return err
		}
		all = append(all, s.out...)
	}
	slices.SortFunc(all, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	all = slices.CompactFunc(all, func(a, b Node) bool { return a.ID == b.ID })
	s.out, s.next = all, 0
	if s.limit > 0 && len(all) >= s.limit {
		s.out, s.next = all[:s.limit], all[s.limit-1].ID
	}
	return nil
}

// matches reports whether the folded name holds one of the query's forms.
func (s *searcher) matches(folded string) bool {
	for _, q := range s.qs {
		if strings.Contains(folded, q) {
			return true
		}
	}
	return false
}

// searcher is one search, inside its read transaction.
type searcher struct {
	tx      kv.Txn
	root    uint64
	q       string   // folded: the form byGram reads the index for
	qs      []string // every folded form of the query (queryForms)
	limit   int
	now     int64
	scanMax int
	out     []Node
	next    uint64
}

// take checks the candidate id against its record: the index says what
// the name was when written, the record what it is, and only the path
// says whether a folder above it is deleted. It returns kv.ErrStop once
// the page is full.
func (s *searcher) take(ctx context.Context, id uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rec, _, err := loadNode(s.tx, id)
	if errors.Is(err, ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if rec.Root != s.root || rec.Parent == 0 || rec.Deleted != 0 || !s.matches(fold(rec.Name)) {
		return nil
	}
	n := rec.public(s.now)
	var gone bool
	if n.Path, gone, err = resolve(s.tx, rec); errors.Is(err, errStaged) || (err == nil && gone) {
		return nil
	} else if err != nil {
		return err
	}
	s.out = append(s.out, n)
	if s.limit > 0 && len(s.out) >= s.limit {
		s.next = id
		return kv.ErrStop
	}
	return nil
}

// byGram scans the list of the query's rarest trigram.
func (s *searcher) byGram(ctx context.Context, after uint64) error {
	g, err := s.rarest(after)
	if err != nil || g == "" {
		return err
	}
	return s.tx.Scan(gramPrefix(s.root, g), gramKey(s.root, g, after+1), func(k, v []byte) error {
		if !strings.Contains(string(v), s.q) {
			return nil
		}
		return s.take(ctx, entryNode(k))
	})
}

// byName scans the root's names, for a query too short to have a
// trigram, up to scanMax of them.
func (s *searcher) byName(ctx context.Context, after uint64) error {
	read := 0
	last := after
	err := s.tx.Scan(nameEntryPrefix(s.root), nameEntryKey(s.root, after+1), func(k, v []byte) error {
		if read == s.scanMax {
			s.next = last
			return kv.ErrStop
		}
		read++
		last = entryNode(k)
		if !s.matches(string(v)) {
			return nil
		}
		return s.take(ctx, last)
	})
	return err
}

// rarest returns the trigram of the query with the fewest entries above
// after, "" when one has none. It counts the lists side by side, each up
// to a cap that grows fourfold per round, so each list is read at most to
// about four times the shortest one's length, however long it is.
func (s *searcher) rarest(after uint64) (string, error) {
	type probe struct {
		gram string
		n    int
		from []byte
		done bool
	}
	var ps []probe
	for _, g := range grams(s.q) {
		ps = append(ps, probe{gram: g, from: gramKey(s.root, g, after+1)})
	}
	for limit := 256; ; limit *= 4 {
		best := -1
		for i := range ps {
			p := &ps[i]
			if !p.done {
				p.done = true
				err := s.tx.Scan(gramPrefix(s.root, p.gram), p.from, func(k, _ []byte) error {
					if p.n >= limit {
						p.from, p.done = append(p.from[:0], k...), false
						return kv.ErrStop
					}
					p.n++
					return nil
				})
				if err != nil {
					return "", err
				}
			}
			if p.done && p.n == 0 {
				return "", nil
			}
			if p.done && (best < 0 || p.n < ps[best].n) {
				best = i
				limit = p.n // counting any other list further is no use
			}
		}
		if best >= 0 {
			return ps[best].gram, nil
		}
		if limit >= 1<<20 {
			return ps[0].gram, nil
		}
	}
}

// scanAll searches a root whose index is not whole yet (see
// backfillNames) by reading every item, as before the index: the same
// answer, in the same order, at the old cost.
func (s *searcher) scanAll(ctx context.Context, after uint64) error {
	var ids []uint64
	err := s.tx.Scan(timePrefix(s.root), nil, func(k, _ []byte) error {
		if id := timeKeyNode(k); id > after {
			ids = append(ids, id)
		}
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := s.take(ctx, id); errors.Is(err, kv.ErrStop) {
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

// ModifiedSince returns the live files of a root modified at or after
// since, oldest first, with their paths: at least limit of them (0: no
// limit) when there are, and past limit every file modified in the same
// second as the last one, up to wholeSecondMax times limit. Clients see
// times in whole seconds and page by asking again from the second after
// the last one they got; a page that ended inside a second would make
// them miss the rest of it, and a second holding more than limit files
// would stop them for good. The bound keeps one answer from holding a
// whole copied tree whose files share their times.
func (fs *FS) ModifiedSince(ctx context.Context, root uint64, since time.Time, limit int) ([]Node, error) {
	return fs.scanRoot(ctx, root, clampNs(since), limit, true, func(r nodeRec) bool { return !r.Dir })
}

// wholeSecondMax bounds a ModifiedSince page that finishes its last
// second, in multiples of its limit.
const wholeSecondMax = 10

// scanRoot visits the live items of a root modified at or after from, in
// modification order, and keeps those match accepts, up to limit, and
// with wholeSecond also the rest of the last one's second.
func (fs *FS) scanRoot(ctx context.Context, root uint64, from int64, limit int, wholeSecond bool, match func(nodeRec) bool) ([]Node, error) {
	var out []Node
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		out = out[:0]
		if _, err := loadRoot(tx, root); err != nil {
			return err
		}
		now := fs.nowNs()
		start := timeKey(root, max(from, 0), 0)
		return tx.Scan(timePrefix(root), start, func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			rec, _, err := loadNode(tx, timeKeyNode(k))
			if err != nil {
				return err
			}
			if limit > 0 && len(out) >= limit && (fromNs(rec.Modified).Unix() != out[len(out)-1].Modified.Unix() || len(out) >= wholeSecondMax*limit) {
				return kv.ErrStop
			}
			if rec.Deleted != 0 || !match(rec) {
				return nil
			}
			n := rec.public(now)
			var gone bool
			if n.Path, gone, err = resolve(tx, rec); errors.Is(err, errStaged) {
				return nil
			} else if err != nil || gone {
				return err
			}
			out = append(out, n)
			if limit > 0 && len(out) >= limit && !wholeSecond {
				return kv.ErrStop
			}
			return nil
		})
	})
	return out, err
}
