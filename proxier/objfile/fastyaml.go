package objfile

import (
	"errors"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// kubectl prints YAML in one plain block style: mappings and sequences by
// indentation, scalars plain or quoted, long strings as literal blocks.
// Converting that with a general YAML library (a token stream, a generic
// tree, then JSON) took three quarters of reading a large objects file.
// toJSON converts that style straight to JSON text, line by line,
// and gives up (errNotPlainBlock) on anything else: flow collections that
// are not empty, anchors, aliases, tags, folded or indented blocks,
// multi-line scalars, tabs, duplicate keys, plain scalars it cannot type
// exactly as the library would. A document it gives up on is converted by
// sigs.k8s.io/yaml, which stays the reference: FuzzFastYAML compares the two.

// errNotPlainBlock is toJSON giving up on a document.
var errNotPlainBlock = errors.New("not plain block YAML")

// yamlToJSON converts one YAML document to JSON with c: the fast way when
// it can, else with sigs.k8s.io/yaml. The result is valid until c's next
// conversion.
func (c *blockConverter) yamlToJSON(doc string) ([]byte, error) {
	if out, err := c.toJSON(doc); err == nil {
		return out, nil
	}
	return yaml.YAMLToJSON([]byte(doc))
}

// yamlLine is one line with content: its indentation and its text after
// the indentation, without the line break and trailing blanks.
type yamlLine struct {
	indent int
	text   string
}

// blockConverter converts documents, one at a time, reusing its buffers.
type blockConverter struct {
	lines []yamlLine
	// raw are the document's lines as they are, for literal blocks;
	// rawIndex maps lines to raw.
	raw      []string
	rawIndex []int
	pos      int
	out      []byte
	// keys are the keys of the mappings being converted, outer first.
	keys []string
	// unterminated is set when the document's last line has no line
	// break (a literal block that ends there ends without one).
	unterminated bool
}

// toJSON converts a document in kubectl's block style to JSON; the result
// is valid until c's next conversion.
func (c *blockConverter) toJSON(text string) ([]byte, error) {
	if !printable(text) {
		return nil, errNotPlainBlock
	}
	c.lines, c.raw, c.rawIndex, c.keys, c.pos = c.lines[:0], c.raw[:0], c.rawIndex[:0], c.keys[:0], 0
	c.out = c.out[:0]
	c.unterminated = len(text) > 0 && text[len(text)-1] != '\n'
	for len(text) > 0 {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		c.raw = append(c.raw, line)
		trimmed := strings.TrimRight(line, " \r")
		content := strings.TrimLeft(trimmed, " ")
		if content == "" || content[0] == '#' {
			continue
		}
		if strings.HasPrefix(content, "\t") || content == "---" || content == "..." || strings.HasPrefix(content, "%") {
			return nil, errNotPlainBlock
		}
		c.lines = append(c.lines, yamlLine{indent: len(trimmed) - len(content), text: content})
		c.rawIndex = append(c.rawIndex, len(c.raw)-1)
	}
	if len(c.lines) == 0 {
		return []byte("null"), nil
	}
	if err := c.block(c.lines[0].indent); err != nil {
		return nil, err
	}
	if c.pos != len(c.lines) {
		return nil, errNotPlainBlock
	}
	return c.out, nil
}

// printable reports whether doc is valid UTF-8 holding only characters
// YAML allows unescaped, and of the control characters only line feeds:
// tabs and carriage returns (which YAML gives meanings of their own, and
// kubectl never prints unquoted) send the document to the reference.
func printable(doc string) bool {
	for i := 0; i < len(doc); {
		b := doc[i]
		if b < utf8.RuneSelf {
			if b < 0x20 && b != '\n' || b == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(doc[i:])
		if r == utf8.RuneError || r >= 0x80 && r <= 0x9f || r == 0xfeff || r == 0xfffe || r == 0xffff {
			return false
		}
		i += size
	}
	return true
}

// block converts the mapping or sequence whose lines start at the current
// line, at indentation indent.
func (c *blockConverter) block(indent int) error {
	l := c.lines[c.pos]
	if l.indent != indent {
		return errNotPlainBlock
	}
	if l.text == "-" || strings.HasPrefix(l.text, "- ") {
		return c.sequence(indent)
	}
	return c.mapping(indent)
}

// sequence converts "- item" lines at indent.
func (c *blockConverter) sequence(indent int) error {
	c.out = append(c.out, '[')
	for n := 0; c.pos < len(c.lines); n++ {
		l := c.lines[c.pos]
		if l.indent != indent || (l.text != "-" && !strings.HasPrefix(l.text, "- ")) {
			break
		}
		if n > 0 {
			c.out = append(c.out, ',')
		}
		rest := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		if rest == "" {
			c.pos++
			if err := c.nested(indent, false); err != nil {
				return err
			}
			continue
		}
		// The item starts on the dash's line: read that line again as if
		// it were indented to the item's text.
		itemIndent := indent + len(l.text) - len(rest)
		if isScalarStart(rest) {
			c.pos++
			if err := c.scalar(rest, indent); err != nil {
				return err
			}
			continue
		}
		c.lines[c.pos] = yamlLine{indent: itemIndent, text: rest}
		if err := c.block(itemIndent); err != nil {
			return err
		}
	}
	c.out = append(c.out, ']')
	return nil
}

// isScalarStart reports whether a sequence item's text is a scalar rather
// than the first entry of a mapping.
func isScalarStart(s string) bool {
	if s[0] == '"' || s[0] == '\'' || s[0] == '|' || s[0] == '{' || s[0] == '[' {
		return true
	}
	return !strings.Contains(s, ": ") && !strings.HasSuffix(s, ":")
}

// mapping converts "key: value" lines at indent.
func (c *blockConverter) mapping(indent int) error {
	c.out = append(c.out, '{')
	first := len(c.keys)
	defer func() { c.keys = c.keys[:first] }()
	for c.pos < len(c.lines) {
		l := c.lines[c.pos]
		if l.indent != indent || l.text == "-" || strings.HasPrefix(l.text, "- ") {
			if l.indent > indent {
				return errNotPlainBlock
			}
			break
		}
		key, value, err := splitEntry(l.text)
		if err != nil {
			return err
		}
		for _, k := range c.keys[first:] {
			if k == key {
				return errNotPlainBlock
			}
		}
		c.keys = append(c.keys, key)
		if len(c.keys) > first+1 {
			c.out = append(c.out, ',')
		}
		c.out = appendJSONString(c.out, key)
		c.out = append(c.out, ':')
		c.pos++
		if value == "" {
			// The value is the block that follows: deeper, or a sequence
			// at this indentation (kubectl's style for lists).
			if err := c.nested(indent, true); err != nil {
				return err
			}
			continue
		}
		if err := c.scalar(value, indent); err != nil {
			return err
		}
	}
	c.out = append(c.out, '}')
	return nil
}

// nested converts the block after a key or a dash with nothing after it:
// deeper lines, or (after a key) a sequence at the same indentation; with
// neither the value is null.
func (c *blockConverter) nested(indent int, sameIndentSequence bool) error {
	if c.pos < len(c.lines) {
		next := c.lines[c.pos]
		if next.indent > indent {
			return c.block(next.indent)
		}
		if sameIndentSequence && next.indent == indent && (next.text == "-" || strings.HasPrefix(next.text, "- ")) {
			return c.sequence(indent)
		}
	}
	c.out = append(c.out, "null"...)
	return nil
}

// splitEntry splits "key: value" (or "key:") into the key and the value's
// text. Keys are plain or double-quoted strings.
func splitEntry(text string) (key, value string, err error) {
	if text[0] == '"' {
		end := strings.IndexByte(text[1:], '"')
		if end < 0 || strings.IndexByte(text[1:end+1], '\\') >= 0 {
			return "", "", errNotPlainBlock
		}
		key, rest := text[1:end+1], text[end+2:]
		if len(key) > 1000 {
			return "", "", errNotPlainBlock
		}
		if rest == ":" {
			return key, "", nil
		}
		if !strings.HasPrefix(rest, ": ") {
			return "", "", errNotPlainBlock
		}
		return key, strings.TrimLeft(rest[2:], " "), nil
	}
	i := strings.Index(text, ": ")
	if i < 0 {
		if !strings.HasSuffix(text, ":") {
			return "", "", errNotPlainBlock
		}
		key = text[:len(text)-1]
	} else {
		key, value = text[:i], strings.TrimLeft(text[i+2:], " ")
	}
	if !plainKey(key) || len(key) > 1000 {
		// YAML limits an implicit key to 1,024 characters.
		return "", "", errNotPlainBlock
	}
	return key, value, nil
}
