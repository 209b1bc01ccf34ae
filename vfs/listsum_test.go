package vfs

import (
	"math"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// TestDecodeListSum: the hand decoder of a listing sum's shard reads what
// put writes as cbor.Unmarshal does, at every integer width and sign, and
// hands any other form to cbor, errors included.
func TestDecodeListSum(t *testing.T) {
	for _, s := range []listSumRec{
		{}, {Count: 1}, {Count: -1}, {Count: -24}, {Count: -25}, {Count: 23}, {Count: 24}, {Count: 255}, {Count: 256},
		{Count: 65536}, {Count: math.MaxInt64}, {Count: math.MinInt64}, {Hi: 1, Lo: 2, Count: 3},
		{Hi: math.MaxUint64, Lo: math.MaxUint64, Count: -1}, {Hi: 1 << 32, Lo: 1<<32 - 1}, {Lo: 300},
	} {
		var got listSumRec
		if err := decodeListSum(enc(s), &got); err != nil || got != s {
			t.Errorf("%+v: decoded %+v, %v", s, got, err)
		}
	}
	for _, b := range [][]byte{
		nil, {0xa1}, {0xa1, 0x01}, {0xa1, 0x04, 0x01}, {0xa1, 0x01, 0x20}, {0xa4, 1, 1, 2, 2, 3, 3, 4, 4},
		{0xa1, 0x03, 0x3b, 0x80, 0, 0, 0, 0, 0, 0, 0}, {0xa0, 0x00}, {0xbf, 0x01, 0x01, 0xff}, {0xa1, 0x61, 'x', 0x01},
	} {
		var got, want listSumRec
		err := decodeListSum(b, &got)
		werr := cbor.Unmarshal(b, &want)
		if (err == nil) != (werr == nil) || got != want {
			t.Errorf("% x: decoded %+v, %v; cbor %+v, %v", b, got, err, want, werr)
		}
	}
}
