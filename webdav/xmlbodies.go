package webdav

import (
	"io"
	"sync"
)

// DefaultMaxXMLBodies is Options.MaxXMLBodies when it is 0.
const DefaultMaxXMLBodies = 8

// xmlReaders counts the XML bodies (PROPFIND, PROPPATCH, LOCK) each
// person's requests are being read, so that one person's slow bodies
// hold at most max of them at once. A body is parsed into a tree as it
// arrives, some 2 MiB for one of maxXMLBody, and kept while a byte a
// minute comes (http.body_idle_timeout): without a bound 100 such
// requests of one person held 195 MiB, and the connections one address
// may hold (1024) some 2 GiB, for as long as they trickled.
type xmlReaders struct {
	max int // 0 or less: no bound
	mu  sync.Mutex
	n   map[uint64]int
}

func newXMLReaders(max int) *xmlReaders { return &xmlReaders{max: max, n: map[uint64]int{}} }

// parse reads r's XML body for person, or is errTooManyXMLBodies when
// person's requests are reading max bodies already.
func (x *xmlReaders) parse(person uint64, r io.Reader) (*element, error) {
	if x.max > 0 {
		x.mu.Lock()
		if x.n[person] >= x.max {
			x.mu.Unlock()
			return nil, errTooManyXMLBodies
		}
		x.n[person]++
		x.mu.Unlock()
		defer func() {
			x.mu.Lock()
			if x.n[person]--; x.n[person] <= 0 {
				delete(x.n, person)
			}
			x.mu.Unlock()
		}()
	}
	return parseXML(r)
}
