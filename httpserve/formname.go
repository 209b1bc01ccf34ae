package httpserve

import (
	"mime/multipart"
	"strings"
)

// FileName is the name of the file part p: its filename (RFC 7578's
// filename* too) less any directory part, whether "/" or "\" separates
// it. Old Windows browsers (Internet Explorer, legacy Edge in some
// modes) send the whole path of the file chosen, "C:\Users\me\a.txt",
// and multipart.Part.FileName drops only "/" directories on Linux, so
// such an upload was refused, invalid_name (a name holds no "\"), where
// the same file from any other client was stored. Every upload form,
// the API's and the share pages', reads the name here.
func FileName(p *multipart.Part) string {
	n := p.FileName()
	if i := strings.LastIndexByte(n, '\\'); i >= 0 {
		n = n[i+1:]
	}
	return n
}
