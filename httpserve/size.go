package httpserve

import "strconv"

// FormatSize is a byte count as people read it: the REST API's
// *_formatted strings (spec 1.7) and the share pages alike. Whole bytes
// below 1000 ("999 B"), otherwise one decimal in the largest decimal unit
// that keeps the number below 1000 ("1.5 MB", "1.0 GB").
func FormatSize(n int64) string {
	if n < 1000 && n > -1000 {
		return strconv.FormatInt(n, 10) + " B"
	}
	// Decimal (SI) units: what people see in file managers and on disk
	// labels; the spec does not show a choice.
	units := [...]string{"B", "KB", "MB", "GB", "TB", "PB", "EB"}
	v := float64(n)
	u := 0
	// 999.95 and up would print as "1000.0": move to the next unit first.
	for (v >= 999.95 || v <= -999.95) && u < len(units)-1 {
		v /= 1000
		u++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[u]
}
