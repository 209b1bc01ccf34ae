package webdav

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Bounds on request bodies parsed as XML (PROPFIND, PROPPATCH, LOCK). The
// whole document is held as a tree, which costs some hundred bytes per
// element on top of the text, so the element count and the nesting are
// bounded as well as the size. Real clients send a few dozen elements
// nested five deep (a PROPFIND of Windows asks for ten properties, a
// PROPPATCH of litmus sets ten values); a PROPPATCH of vfs.MaxProps
// properties fits within all three.
const (
	// maxXMLBody is the largest body, in bytes: a PROPPATCH of
	// vfs.MaxPropsBytes of values, escaped, fits several times over.
	maxXMLBody = 1 << 20
	// maxXMLElements is the most elements one body may have.
	maxXMLElements = 10000
	// maxXMLDepth is the deepest nesting, the document element being 1:
	// a property value gets some 60 levels of its own XML.
	maxXMLDepth = 64
)

const davNS = "DAV:"

// element is a parsed XML element: its resolved name, attributes and
// content (child *element or xml.CharData) in document order.
type element struct {
	name    xml.Name
	attrs   []xml.Attr
	content []any
}

// children returns the child elements.
func (e *element) children() []*element {
	var out []*element
	for _, c := range e.content {
		if el, ok := c.(*element); ok {
			out = append(out, el)
		}
	}
	return out
}

func (e *element) is(space, local string) bool {
	return e.name.Space == space && e.name.Local == local
}

// errBadXML is a body that is not well-formed XML with namespaces (400).
var errBadXML = errors.New("malformed XML body")

// errXMLTooLarge is a body over maxXMLBody, maxXMLElements or maxXMLDepth (413).
var errXMLTooLarge = errors.New("XML body too large")

// capReader reads at most n bytes and then fails with errXMLTooLarge if
// more follow, where an io.LimitReader would end the body early and leave
// the client a confusing "unexpected EOF".
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(b []byte) (int, error) {
	if c.n <= 0 {
		var one [1]byte
		if n, _ := io.ReadFull(c.r, one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("%w: more than %d bytes", errXMLTooLarge, maxXMLBody)
	}
	if int64(len(b)) > c.n {
		b = b[:c.n]
	}
	n, err := c.r.Read(b)
	c.n -= int64(n)
	return n, err
}

// parseXML reads one XML document. Beyond well-formedness it refuses what
// encoding/xml lets through but XML Namespaces forbids: an undeclared
// prefix, an empty prefixed declaration (xmlns:p=""), and the reserved
// xml and xmlns namespaces declared or naming an element. An empty body is
// (nil, nil). A body over maxXMLBody bytes, maxXMLElements elements or
// maxXMLDepth levels is errXMLTooLarge.
func parseXML(r io.Reader) (*element, error) {
	d := xml.NewDecoder(&capReader{r: r, n: maxXMLBody})
	elements := 0
	var stack []*element
	var scopes [][]string // namespace URIs declared by each open element
	var root *element
	for {
		tok, err := d.Token()
		if err == io.EOF {
			if len(stack) != 0 {
				return nil, errBadXML
			}
			return root, nil
		}
		if errors.Is(err, errXMLTooLarge) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errBadXML, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if elements++; elements > maxXMLElements {
				return nil, fmt.Errorf("%w: more than %d elements", errXMLTooLarge, maxXMLElements)
			}
			if len(stack) >= maxXMLDepth {
				return nil, fmt.Errorf("%w: elements nested more than %d deep", errXMLTooLarge, maxXMLDepth)
			}
			var declared []string
			for _, a := range t.Attr {
				if a.Name.Space == "xmlns" {
					if a.Value == "" {
						return nil, fmt.Errorf("%w: empty namespace for prefix %q", errBadXML, a.Name.Local)
					}
					if reservedNS(a.Value) && (a.Name.Local != "xml" || a.Value != xmlNS) {
						return nil, fmt.Errorf("%w: prefix %q bound to the reserved namespace %q", errBadXML, a.Name.Local, a.Value)
					}
					declared = append(declared, a.Value)
				} else if a.Name.Space == "" && a.Name.Local == "xmlns" {
					if reservedNS(a.Value) {
						return nil, fmt.Errorf("%w: the reserved namespace %q as the default", errBadXML, a.Value)
					}
					declared = append(declared, a.Value)
				}
			}
			scopes = append(scopes, declared)
			if reservedNS(t.Name.Space) {
				// No element is in them: written back, as a dead
				// property is, it would need a declaration that XML
				// Namespaces forbids, and expat refuses the answer.
				return nil, fmt.Errorf("%w: element %q in the reserved namespace %q", errBadXML, t.Name.Local, t.Name.Space)
			}
			if t.Name.Space != "" && !inScope(scopes, t.Name.Space) {
				return nil, fmt.Errorf("%w: undeclared namespace prefix %q", errBadXML, t.Name.Space)
			}
			var names map[xml.Name]bool
			if len(t.Attr) > 8 {
				names = make(map[xml.Name]bool, len(t.Attr))
			}
			for i, a := range t.Attr {
				// encoding/xml leaves an undeclared prefix as the
				// attribute's namespace, which then reads as a URI.
				if a.Name.Space != "" && a.Name.Space != "xmlns" && !inScope(scopes, a.Name.Space) {
					return nil, fmt.Errorf("%w: undeclared namespace prefix %q", errBadXML, a.Name.Space)
				}
				// An attribute twice, by its name or by its namespace
				// and local name (XML 3.1, XML Namespaces 6.3), which
				// encoding/xml lets through: stored in a dead property,
				// it made every PROPFIND answer naming it one that
				// expat (davfs2, neon, Windows) refuses whole. A map
				// past a few, as a body may hold 100,000 attributes.
				twice := names[a.Name]
				if names != nil {
					names[a.Name] = true
				} else {
					twice = slices.ContainsFunc(t.Attr[:i], func(b xml.Attr) bool { return b.Name == a.Name })
				}
				if twice {
					return nil, fmt.Errorf("%w: attribute %q twice", errBadXML, a.Name.Local)
				}
			}
			el := &element{name: t.Name, attrs: t.Copy().Attr}
			if len(stack) == 0 {
				if root != nil {
					return nil, errBadXML
				}
				root = el
			} else {
				parent := stack[len(stack)-1]
				parent.content = append(parent.content, el)
			}
			stack = append(stack, el)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
			scopes = scopes[:len(scopes)-1]
		case xml.CharData:
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				top.content = append(top.content, xml.CharData(bytes.Clone(t)))
			} else if len(bytes.TrimSpace(t)) != 0 {
				return nil, errBadXML
			}
		}
	}
}

// xmlNS is the namespace of the xml prefix, which is never declared.
const xmlNS = "http://www.w3.org/XML/1998/namespace"

// xmlnsNS is the namespace of the xmlns prefix, which no prefix is bound to.
const xmlnsNS = "http://www.w3.org/2000/xmlns/"

// reservedNS reports whether ns is a namespace name XML Namespaces
// reserves: bound to the prefix xml and no other (xmlNS), to none
// (xmlnsNS), and never the default namespace.
func reservedNS(ns string) bool { return ns == xmlNS || ns == xmlnsNS }

func inScope(scopes [][]string, ns string) bool {
	if ns == xmlNS {
		return true
	}
	for _, s := range scopes {
		for _, d := range s {
			if d == ns {
				return true
			}
		}
	}
	return false
}

// innerXML encodes the content of e self-contained: every element carries
// its own namespace declaration, so the value reads the same wherever it
// is later embedded.
func innerXML(e *element) []byte {
	var b bytes.Buffer
	for _, c := range e.content {
		writeNode(&b, c)
	}
	return b.Bytes()
}

func writeNode(b *bytes.Buffer, c any) {
	switch v := c.(type) {
	case xml.CharData:
		xml.EscapeText(b, v)
	case *element:
		b.WriteByte('<')
		b.WriteString(v.name.Local)
		b.WriteString(` xmlns="`)
		xml.EscapeText(b, []byte(v.name.Space))
		b.WriteByte('"')
		n := 0
		for _, a := range v.attrs {
			if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
				continue
			}
			b.WriteByte(' ')
			if a.Name.Space == xmlNS {
				// xml:lang, xml:space: the xml prefix is bound by
				// definition, and binding another prefix to its
				// namespace is an error to a namespace-aware parser.
				b.WriteString("xml:")
			} else if a.Name.Space != "" {
				p := fmt.Sprintf("a%d", n)
				n++
				fmt.Fprintf(b, `xmlns:%s="`, p)
				xml.EscapeText(b, []byte(a.Name.Space))
				b.WriteString(`" ` + p + ":")
			}
			b.WriteString(a.Name.Local)
			b.WriteString(`="`)
			xml.EscapeText(b, []byte(a.Value))
			b.WriteByte('"')
		}
		if len(v.content) == 0 {
			b.WriteString("/>")
			return
		}
		b.WriteByte('>')
		for _, cc := range v.content {
			writeNode(b, cc)
		}
		b.WriteString("</")
		b.WriteString(v.name.Local)
		b.WriteByte('>')
	}
}

// langOf returns the xml:lang in scope of e: its own, else inherited.
func langOf(e *element, inherited string) string {
	for _, a := range e.attrs {
		if a.Name.Space == xmlNS && a.Name.Local == "lang" {
			return a.Value
		}
	}
	return inherited
}

// deadValue encodes the dead property e for storage: its content,
// self-contained (innerXML), preceded by NUL, lang and NUL when an
// xml:lang is in scope of e (RFC 4918 4.3 has the server keep it). NUL
// never occurs in XML, so a value without a language, stored before or
// since, reads as it is.
func deadValue(e *element, lang string) []byte {
	inner := innerXML(e)
	if lang == "" {
		return inner
	}
	return slices.Concat([]byte{0}, []byte(lang), []byte{0}, inner)
}

// splitDead reads a stored dead property back: its xml:lang and content.
func splitDead(v []byte) (lang string, inner []byte) {
	if len(v) > 0 && v[0] == 0 {
		if i := bytes.IndexByte(v[1:], 0); i >= 0 {
			return string(v[1 : 1+i]), v[2+i:]
		}
	}
	return "", v
}

// propKey names a property for storage: Clark notation, {space}local.
func propKey(n xml.Name) string { return "{" + n.Space + "}" + n.Local }

// propName reads a Clark-notation key back. The namespace is a URI
// reference and may itself hold "}", while an XML name never does, so the
// local name is what follows the last "}": split at the first, part of a
// crafted namespace would be written out as the element's name, raw.
func propName(k string) xml.Name {
	if strings.HasPrefix(k, "{") {
		if i := strings.LastIndexByte(k, '}'); i > 0 {
			return xml.Name{Space: k[1:i], Local: k[i+1:]}
		}
	}
	return xml.Name{Local: k}
}

// escape returns s escaped for XML text or attribute values.
func escape(s string) string {
	// Most names and hrefs are plain: return them as they are instead of
	// building a copy (a PROPFIND escapes several strings per entry).
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 0x20 && c < 0x7f && c != '&' && c != '<' && c != '>' && c != '"' && c != '\''
	}
	if plain {
		return s
	}
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
