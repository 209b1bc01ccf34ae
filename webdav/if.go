package webdav

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"berth/httpserve"
	"berth/vfs"
)

// ifList is one list of an If header (RFC 4918 10.4): its conditions all
// hold, or the list fails. resource is the tag's URI, "" for the request's.
type ifList struct {
	resource string
	conds    []ifCond
}

// ifCond is one condition: a state token (lock token) or an entity tag,
// possibly negated.
type ifCond struct {
	not   bool
	token string
	etag  string
}

var errBadIf = errors.New("malformed If header")

// maxIfConditions bounds the conditions of one If header, all lists
// together. Each costs lookups in the store (a state token is searched on
// the resource and every folder above it), and an If header may be as
// large as the server's header limit (1 MiB): some 200,000 conditions.
// Clients send one or two (davfs2, Windows, Office); a MOVE of a folder
// that holds locked files sends one tagged list per lock, hence the room.
const maxIfConditions = 256

// maxIfSegments bounds the path segments of the distinct resources an If
// header's lists name, all together. Judging a list reads its resource's
// path from the top, and a header within maxIfConditions could name 256
// resources 1,000 folders deep: about 4 seconds of one request's work
// with the folders there. A MOVE's tagged lists name its locked files,
// which a few thousand segments hold.
const maxIfSegments = 4 * maxPathDepth

// parseIf parses an If header value into its lists.
func parseIf(s string) ([]ifList, error) {
	var out []ifList
	conds := 0
	tag := ""
	s = strings.TrimSpace(s)
	for s != "" {
		switch s[0] {
		case '<':
			end := strings.IndexByte(s, '>')
			if end < 0 {
				return nil, errBadIf
			}
			tag, s = s[1:end], s[end+1:]
		case '(':
			end := strings.IndexByte(s, ')')
			if end < 0 {
				return nil, errBadIf
			}
			cs, err := parseConds(s[1:end])
			if err != nil {
				return nil, err
			}
			if conds += len(cs); conds > maxIfConditions {
				return nil, fmt.Errorf("%w: more than %d conditions", errBadIf, maxIfConditions)
			}
			out = append(out, ifList{resource: tag, conds: cs})
			s = s[end+1:]
		default:
			return nil, errBadIf
		}
		s = strings.TrimSpace(s)
	}
	if len(out) == 0 {
		return nil, errBadIf
	}
	return out, nil
}

func parseConds(s string) ([]ifCond, error) {
	var out []ifCond
	s = strings.TrimSpace(s)
	for s != "" {
		var c ifCond
		if len(s) >= 3 && strings.EqualFold(s[:3], "not") {
			c.not = true
			s = strings.TrimSpace(s[3:])
		}
		if s == "" {
			return nil, errBadIf
		}
		switch s[0] {
		case '<':
			end := strings.IndexByte(s, '>')
			if end < 0 {
				return nil, errBadIf
			}
			c.token, s = s[1:end], s[end+1:]
		case '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, errBadIf
			}
			c.etag, s = s[1:end], s[end+1:]
		default:
			return nil, errBadIf
		}
		out = append(out, c)
		s = strings.TrimSpace(s)
	}
	if len(out) == 0 {
		return nil, errBadIf
	}
	return out, nil
}

// submittedTokens are the lock tokens an If header presents: every state
// token it names outside a Not, whether or not its list held.
func submittedTokens(lists []ifList) []string {
	var out []string
	for _, l := range lists {
		for _, c := range l.conds {
			if c.token != "" && !c.not {
				out = append(out, c.token)
			}
		}
	}
	return out
}

// preconditions checks the If header and If-Match / If-None-Match /
// If-Unmodified-Since of a write to the resource n (exists or not) at
// dav path p.
func (s *session) preconditions(r *http.Request, p string, n vfs.Node, exists bool) error {
	if err := s.checkIf(r, p); err != nil {
		return err
	}
	if exists && matchesTags(r) {
		if err := s.listed(&n); err != nil {
			return err
		}
	}
	return writeConditions(r, n, exists)
}

// matchesTags reports whether r's If-Match or If-None-Match compares
// entity tags, for which a collection's listing hash is read (listed).
func matchesTags(r *http.Request) bool {
	return r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != ""
}

// judgesTags reports whether r's conditions may compare the entity tag
// of the resource at its path: If-Match, If-None-Match, or an If header
// with an entity-tag condition, as parseIf reads it (a "[" alone may be
// a tagged list's IPv6 host). A malformed If header judges nothing:
// checkIf refuses it.
func judgesTags(r *http.Request) bool {
	if matchesTags(r) {
		return true
	}
	h := r.Header.Get("If")
	if h == "" {
		return false
	}
	lists, err := parseIf(h)
	if err != nil {
		return false
	}
	for _, l := range lists {
		for _, c := range l.conds {
			if c.etag != "" {
				return true
			}
		}
	}
	return false
}

// writeConditions judges a write's If-Match, If-None-Match and
// If-Unmodified-Since against the resource n (exists or not), reading
// nothing from the store, so that a check inside a vfs commit
// (DeleteAt, MoveAt) can run it on the item as the commit finds it. An
// If-Match or If-None-Match that is no list of entity tags is
// errBadCondition (400), as REST refuses it: a write is not guessed at.
func writeConditions(r *http.Request, n vfs.Node, exists bool) error {
	if h := httpserve.MalformedCondition(r); h != "" {
		return describe(errBadCondition, `%s must be * or a comma-separated list of entity tags, such as "r12"`, h)
	}
	return checkMatch(r, n, exists)
}

// checkIf evaluates the request's If header (RFC 4918 10.4) against the
// resource at dav path p: it holds when any one of its lists holds. The
// tokens the header presents become the session's lock tokens, so vfs lets
// the write through the locks they name. A failed header is errIfFailed
// (412); a malformed one errBadIf (400).
func (s *session) checkIf(r *http.Request, p string) error {
	h := r.Header.Get("If")
	if h == "" {
		return nil
	}
	lists, err := parseIf(h)
	if err != nil {
		return err
	}
	s.tokens = append(s.tokens, submittedTokens(lists)...)
	// Resources and their lock tokens are judged once however many
	// lists name them (256 untagged lists of a deep request path read
	// it 256 times), and the distinct ones are bounded in depth.
	memo := ifMemo{seen: map[string]bool{}, etags: map[string]string{}, locks: map[[2]string]bool{}}
	segs := strings.Count(p, "/")
	for _, l := range lists {
		res := p
		if l.resource != "" {
			u, err := url.Parse(l.resource)
			if err != nil {
				return describe(errBadIf, "malformed resource tag in If header")
			}
			if res, err = s.h.davPath(u.EscapedPath()); errors.Is(err, errPathTooDeep) {
				return describe(errBadIf, "a resource tag in the If header: %v", err)
			} else if err != nil {
				continue // a resource not ours is never in the state the list names
			}
		}
		if !memo.seen[res] && res != p {
			memo.seen[res] = true
			if segs += strings.Count(res, "/"); segs > maxIfSegments {
				return describe(errBadIf, "the If header's resources hold more than %d path segments in all", maxIfSegments)
			}
		}
		if s.listHolds(res, l.conds, &memo) {
			return nil
		}
	}
	return errIfFailed
}

// ifMemo is what checkIf found out so far: the resources counted
// against maxIfSegments, each resource's entity tag ("" when it has
// none) once a list named one, and whether a token names a lock
// covering it.
type ifMemo struct {
	seen  map[string]bool
	etags map[string]string
	locks map[[2]string]bool
}

func (s *session) listHolds(p string, conds []ifCond, memo *ifMemo) bool {
	for _, c := range conds {
		var holds bool
		if c.token != "" {
			k := [2]string{p, c.token}
			var ok bool
			if holds, ok = memo.locks[k]; !ok {
				_, _, err := s.findLock(p, c.token)
				holds = err == nil
				memo.locks[k] = holds
			}
		} else {
			// RFC 4918 10.4.4: compared strongly, a weak tag never
			// matches.
			etag := s.ifETag(p, memo)
			holds = etag != "" && c.etag == etag && !strings.HasPrefix(etag, "W/")
		}
		if holds == c.not {
			return false
		}
	}
	return true
}

// ifETag is the entity tag of the resource at dav path p, "" where there
// is none, read once per If header (memo), and only for a list that
// names a tag: a collection's reads its listing hash.
func (s *session) ifETag(p string, memo *ifMemo) string {
	etag, ok := memo.etags[p]
	if !ok {
		if t, err := s.resolve(p); err == nil {
			if n, err := s.node(t); err == nil && s.listed(&n) == nil {
				etag = fileInfoETag(n)
			}
		}
		memo.etags[p] = etag
	}
	return etag
}

// fileInfoETag is n's entity tag; the list of roots (no node) has a fixed one.
// A file's is vfs's (REST's), of its revision. A collection's is made of
// its id and its listing hash (n.Listing, which the caller reads:
// listed), so it changes with every change of a direct child (a new,
// renamed, deleted or locked child, a new revision), as a sync client
// that lists a folder only when its tag changed needs; vfs's tag of a
// folder never changes while it lives. One without its listing read
// (none of the paths that send or judge a tag) has vfs's.
func fileInfoETag(n vfs.Node) string {
	switch {
	case n.ID == 0:
		return `"top"`
	case n.Dir && n.Listing != "":
		// Hex digits: nothing a quoted tag or element text escapes.
		return `"d` + strconv.FormatUint(n.ID, 10) + "-" + n.Listing + `"`
	}
	return n.ETag()
}

// listed reads the listing hash of n, a collection, into n.Listing,
// where it is not read yet, for its entity tag (fileInfoETag).
func (s *session) listed(n *vfs.Node) error {
	if !n.Dir || n.ID == 0 || n.Listing != "" {
		return nil
	}
	h, err := s.h.opts.FS.ListHash(s.ctx, n.RootID, n.ID)
	n.Listing = h
	return err
}

// checkMatch applies If-Match, If-Unmodified-Since and If-None-Match
// to a resource that exists (n) or not, judged as REST and the share pages
// judge them (httpserve.FailedCondition: RFC 9110 13.2.2's order, entity
// tags read as net/http reads them, a date that proves a resource
// unmodified only when it was modified before that date's second began).
// One that does not hold is errPrecondition (412).
func checkMatch(r *http.Request, n vfs.Node, exists bool) error {
	etag := ""
	if exists {
		etag = fileInfoETag(n)
	}
	if h := httpserve.FailedCondition(r, etag, n.Modified, exists); h != "" {
		return describe(errPrecondition, "%s does not hold", h)
	}
	return nil
}
