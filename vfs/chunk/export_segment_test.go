package chunk

// Cut is cut, for the test that holds it to the library's cuts.
var Cut = cut

// MaxChunkSize is maxChunkSize, the smallest segment.
const MaxChunkSize = maxChunkSize
