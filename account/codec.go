package account

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// codec encodes stored values as CBOR. Times are written as RFC 3339 text
// in UTC with nanoseconds, so they round-trip exactly (the library's default
// of integer seconds would drop sub-second precision).
type codec struct {
	enc cbor.EncMode
	dec cbor.DecMode
}

func newCodec() codec {
	enc, err := cbor.EncOptions{Time: cbor.TimeRFC3339NanoUTC}.EncMode()
	if err != nil {
		panic(fmt.Sprintf("account: cbor options: %v", err)) // static options; cannot fail
	}
	dec, err := cbor.DecOptions{}.DecMode()
	if err != nil {
		panic(fmt.Sprintf("account: cbor options: %v", err))
	}
	return codec{enc: enc, dec: dec}
}

func (c codec) marshal(v any) ([]byte, error) {
	b, err := c.enc.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("account: encode %T: %w", v, err)
	}
	return b, nil
}

func (c codec) unmarshal(b []byte, v any) error {
	if err := c.dec.Unmarshal(b, v); err != nil {
		return fmt.Errorf("account: decode %T: %w", v, err)
	}
	return nil
}
