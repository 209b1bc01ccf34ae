package rest

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// unrouted answers what no route serves, through the error table like every
// other answer, instead of ServeMux's plain-text 404 and 405 (issue 12):
//
//   - a path no route serves: 404 not_found; under /api/2 only after the
//     token checks out, so that without one an unknown path answers the
//     401 a real route answers, byte for byte, and an anonymous caller
//     cannot map which routes exist. Elsewhere (/oauth, /) no route takes
//     a token, so a 401 would wrongly say that one would help;
//   - a path some route serves with other methods: 405, with Allow naming
//     them (HEAD wherever GET, as ServeMux does). When one of those routes
//     takes a token, the token is checked first, for the same reason;
//     public routes (GET /api/2/version, /oauth) answer 405 at once.
//
// It is registered as the pattern "/", which ServeMux picks only when no
// other pattern matches path and method, so routed requests never reach it.
func (s *server) unrouted(r *http.Request) (any, error) {
	allow, public := s.methodsAt(r)
	if len(allow) == 0 {
		return nil, s.unknownPath(r)
	}
	if !public {
		if _, err := s.authenticate(r); err != nil {
			return nil, err
		}
	}
	return nil, &methodNotAllowed{
		allow: allow,
		err:   Describe(ErrMethodNotAllowed, "this path answers only %s", strings.Join(allow, ", ")),
	}
}

// unknownPath is the error for a path no route serves: ErrNotFound, or
// under /api/2 the token's failure first (see unrouted).
func (s *server) unknownPath(r *http.Request) error {
	if p := r.URL.Path; p == "/api/2" || strings.HasPrefix(p, "/api/2/") {
		if _, err := s.authenticate(r); err != nil {
			return err
		}
	}
	return ErrNotFound
}

// methodsAt returns, sorted, the methods some route serves r's path with,
// by asking the mux for each method a route was registered with; public
// is false when one of those routes takes a token.
func (s *server) methodsAt(r *http.Request) (allow []string, public bool) {
	public = true
	for _, m := range s.methods {
		probe := r.Clone(r.Context())
		probe.Method = m
		_, pattern := s.mux.Handler(probe)
		if pattern == "" || pattern == "/" || (pattern == itemGetPattern && !itemGetPathServed(r)) {
			continue
		}
		allow = append(allow, m)
		if !s.public[pattern] {
			public = false
		}
	}
	slices.Sort(allow)
	return allow, public
}

// registered records what unrouted needs to know of a pattern: its method
// (and HEAD with GET, which ServeMux serves alike), and whether its route
// is public, that is takes no token.
func (s *server) registered(pattern string, public bool) {
	s.patterns = append(s.patterns, pattern)
	method, _, ok := strings.Cut(pattern, " ")
	if !ok {
		return
	}
	for _, m := range []string{method, http.MethodHead} {
		if !slices.Contains(s.methods, m) {
			s.methods = append(s.methods, m)
		}
		if method != http.MethodGet {
			break
		}
	}
	if public {
		if s.public == nil {
			s.public = map[string]bool{}
		}
		s.public[pattern] = true
	}
}

// methodNotAllowed is ErrMethodNotAllowed (with its description) and the
// methods for the Allow header, which writeError sets from it.
type methodNotAllowed struct {
	allow []string
	err   error
}

func (e *methodNotAllowed) Error() string { return e.err.Error() }
func (e *methodNotAllowed) Unwrap() error { return e.err }

// itemGetPathServed reports whether itemGet serves r's path with a route:
// the mux matched its pattern, so the path is /api/2/files/{root_id}/
// {item}/{sub}, and its segments unescape as the mux's path values do.
func itemGetPathServed(r *http.Request) bool {
	seg := strings.Split(r.URL.EscapedPath(), "/")
	if len(seg) != 7 {
		return false
	}
	item, err1 := url.PathUnescape(seg[5])
	sub, err2 := url.PathUnescape(seg[6])
	return err1 == nil && err2 == nil && itemGetServes(item, sub)
}
