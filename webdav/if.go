package webdav

import (
	"errors"
	"fmt"
	"strings"
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

// etagMatch compares entity tags strongly, ignoring a weak prefix on
// either side when weak is true.
func etagMatch(a, b string, weak bool) bool {
	if weak {
		a, b = strings.TrimPrefix(a, "W/"), strings.TrimPrefix(b, "W/")
	} else if strings.HasPrefix(a, "W/") || strings.HasPrefix(b, "W/") {
		return false
	}
	return a == b
}
