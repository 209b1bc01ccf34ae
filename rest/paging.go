package rest

import (
	"net/http"
	"strconv"
)

// MaxPageSize is the most objects one page of an organization or person
// list holds (spec 4.5 and 8: at most 100).
const MaxPageSize = 100

// page is the request's choice of one page of a list: the query
// parameters offset (the index of the first object, 0 first, default 0)
// and limit (how many, 1 to MaxPageSize, default MaxPageSize). The spec
// leaves them open (4.5); these are the names its envelope already uses.
type page struct {
	Offset int
	Limit  int
}

// pageOf reads r's paging parameters. A value that is not a whole number
// in range is 400 invalid_request naming the parameter, not silently
// clamped: a client asking for 500 learns the limit.
func pageOf(r *http.Request) (page, error) {
	p := page{Limit: MaxPageSize}
	q := r.URL.Query()
	if v := q.Get("offset"); v != "" || q.Has("offset") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return page{}, Describe(ErrInvalidRequest, "offset must be a whole number, 0 or more")
		}
		p.Offset = n
	}
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			return page{}, Describe(ErrInvalidRequest, "limit must be a whole number from 1 to %d", MaxPageSize)
		}
		p.Limit = n
	}
	return p, nil
}

// pagedBody is the paged list envelope of spec 4.5. Results is never
// null: an empty page is [].
type pagedBody[T any] struct {
	Offset  int `json:"offset"`
	Results []T `json:"results"`
	Total   int `json:"total"`
}

// paged wraps one page of results in the envelope.
func paged[T any](p page, results []T, total int) pagedBody[T] {
	if results == nil {
		results = []T{}
	}
	return pagedBody[T]{Offset: p.Offset, Results: results, Total: total}
}
