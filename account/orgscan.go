package account

import (
	"context"

	"berth/kv"
)

// OrganizationsAfter returns up to limit organizations whose ids are
// greater than after, in id order, deleted ones included: a cursor over
// every organization of the store, for background jobs that apply each
// one's policy and must resume where a bounded run stopped. A page costs
// a scan of its own keys only.
func (s *Service) OrganizationsAfter(ctx context.Context, after uint64, limit int) ([]Organization, error) {
	var out []Organization
	err := s.db.View(ctx, func(tx kv.Txn) error {
		out = out[:0]
		if limit <= 0 {
			return nil
		}
		return tx.Scan([]byte(pfxOrg), key(pfxOrg, after+1), func(k, v []byte) error {
			var o Organization
			if err := s.codec.unmarshal(v, &o); err != nil {
				return err
			}
			out = append(out, o)
			if len(out) == limit {
				return kv.ErrStop
			}
			return ctx.Err()
		})
	})
	return out, err
}
