package chunk

import (
	"context"
	"fmt"
	"sync"
)

// Memory is a Store held in a map, for tests of packages above chunk. It is
// not durable.
type Memory struct {
	mu    sync.RWMutex
	blobs map[ID][]byte
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty memory store.
func NewMemory() *Memory { return &Memory{blobs: make(map[ID][]byte)} }

// Put copies blob, since callers reuse their buffers.
func (m *Memory) Put(ctx context.Context, id ID, blob []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.blobs[id]; !ok {
		m.blobs[id] = append([]byte(nil), blob...)
	}
	return nil
}

// Get returns a copy of the blob, so callers may modify it.
func (m *Memory) Get(ctx context.Context, id ID) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	b, ok := m.blobs[id]
	m.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return append([]byte(nil), b...), nil
}

// Has reports whether id is stored.
func (m *Memory) Has(ctx context.Context, id ID) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.RLock()
	_, ok := m.blobs[id]
	m.mu.RUnlock()
	return ok, nil
}

// Delete removes id.
func (m *Memory) Delete(ctx context.Context, id ID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.blobs, id)
	m.mu.Unlock()
	return nil
}

// Walk calls fn for a snapshot of the stored ids, so fn may call Delete.
func (m *Memory) Walk(ctx context.Context, fn func(ID) error) error {
	m.mu.RLock()
	ids := make([]ID, 0, len(m.blobs))
	for id := range m.blobs {
		ids = append(ids, id)
	}
	m.mu.RUnlock()
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

// Size sums the blob lengths.
func (m *Memory) Size(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var n int64
	for _, b := range m.blobs {
		n += int64(len(b))
	}
	return n, nil
}
