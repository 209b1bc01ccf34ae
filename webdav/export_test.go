package webdav

// Escape lets the external tests (xml_test.go) check the XML escaping of
// answers against encoding/xml.
var Escape = escape
