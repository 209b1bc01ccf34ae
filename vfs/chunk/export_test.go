package chunk

// ReadAhead is readAhead, for tests that count prefetched chunks.
const ReadAhead = readAhead
