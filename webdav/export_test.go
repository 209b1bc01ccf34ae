package webdav

// Escape lets the external tests (xml_test.go) check the XML escaping of
// answers against encoding/xml.
var Escape = escape

// PlainPath and CleanPath are davPath's two ways, for TestPlainPath.
var PlainPath, CleanPath = plainPath, cleanPath

// MaxPathDepth is maxPathDepth.
const MaxPathDepth = maxPathDepth
