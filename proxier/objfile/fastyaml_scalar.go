package objfile

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// The scalars and keys of kubectl's block style (see blockConverter.toJSON).

// plainKey reports whether a plain key is a string that YAML reads as
// itself (not a number, a boolean, null, or special syntax).
func plainKey(k string) bool {
	if k == "" || strings.ContainsAny(k, "#\"'{}[],&*!|>%@`\t") || k[0] == '-' || k[0] == '?' || k[0] == ':' || k[len(k)-1] == ' ' {
		return false
	}
	if k[0] >= '0' && k[0] <= '9' || k[0] == '.' || k[0] == '+' || k == "<<" {
		return false
	}
	_, keyword := yamlKeyword(k)
	return !keyword
}

// yamlKeyword returns the JSON of a plain scalar that YAML 1.1 (which
// sigs.k8s.io/yaml reads) takes as a boolean or null.
func yamlKeyword(s string) (string, bool) {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return "true", true
	case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return "false", true
	case "null", "Null", "NULL", "~":
		return "null", true
	}
	return "", false
}

// scalar converts a value that starts on its key's line (or dash's line),
// at a key or dash of indentation indent.
func (c *blockConverter) scalar(v string, indent int) error {
	switch v[0] {
	case '"':
		return c.doubleQuoted(v)
	case '\'':
		end := len(v) - 1
		if end < 1 || v[end] != '\'' {
			return errNotPlainBlock
		}
		body := v[1:end]
		if strings.Contains(strings.ReplaceAll(body, "''", ""), "'") {
			return errNotPlainBlock
		}
		c.out = appendJSONString(c.out, strings.ReplaceAll(body, "''", "'"))
		return nil
	case '|':
		return c.literal(v, indent)
	case '{', '[':
		if v == "{}" || v == "[]" {
			c.out = append(c.out, v...)
			return nil
		}
		return errNotPlainBlock
	}
	return c.plain(v, indent)
}

// plain converts a plain scalar: a string, an integer, or (by the
// reference, for the rare shapes this does not type itself) anything else.
func (c *blockConverter) plain(v string, indent int) error {
	if c.pos < len(c.lines) && c.lines[c.pos].indent > indent {
		return errNotPlainBlock // continued on the next line
	}
	if strings.Contains(v, " #") || strings.Contains(v, ": ") || strings.HasSuffix(v, ":") || strings.ContainsAny(v[:1], "&*!>%@`,?:-#") && v != "-" && !negativeInt(v) {
		return errNotPlainBlock
	}
	if j, ok := yamlKeyword(v); ok {
		c.out = append(c.out, j...)
		return nil
	}
	switch {
	case decimalInt(v):
		c.out = append(c.out, v...)
	case plainString(v):
		c.out = appendJSONString(c.out, v)
	default:
		// A float, a timestamp, an octal or hex number, or an unusual
		// string: let the reference type this one scalar.
		j, err := yaml.YAMLToJSON([]byte("v: " + v))
		if err != nil || len(j) < 6 || string(j[:5]) != `{"v":` {
			return errNotPlainBlock
		}
		c.out = append(c.out, j[5:len(j)-1]...)
	}
	return nil
}

// decimalInt reports whether s is an integer YAML and JSON read alike: no
// sign but '-', no leading zero, small enough for an int64.
func decimalInt(s string) bool {
	d := strings.TrimPrefix(s, "-")
	if d == "" || len(d) > 18 || (d[0] == '0' && len(d) > 1) || (d == "0" && d != s) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

func negativeInt(s string) bool { return len(s) > 1 && s[0] == '-' && decimalInt(s) }

// plainString reports whether a plain scalar is certainly a string: it
// starts with a letter or '/', or it is a dotted IPv4 address (no number
// or timestamp has three dots and nothing but digits).
func plainString(s string) bool {
	c := s[0]
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '/' {
		// Names, paths, IPv6 addresses (a letter first), "10m"-like
		// values start with a digit and go to the reference.
		return !yamlSpecialWord(s)
	}
	if strings.Count(s, ".") == 3 {
		for i := 0; i < len(s); i++ {
			if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
				return false
			}
		}
		return true
	}
	return false
}

// yamlSpecialWord reports whether a plain scalar that starts with a letter
// is still typed by YAML: ".inf"-like words start with '.', so only the
// spellings of infinity and not-a-number without it matter, and YAML 1.1
// has none; but be safe with anything containing "inf" or "nan" alone.
func yamlSpecialWord(s string) bool {
	switch strings.ToLower(s) {
	case "inf", "nan", "infinity":
		return true
	}
	return false
}

// doubleQuoted converts a double-quoted scalar on one line.
func (c *blockConverter) doubleQuoted(v string) error {
	var b strings.Builder
	i := 1
	for ; i < len(v); i++ {
		ch := v[i]
		if ch == '"' {
			break
		}
		if ch != '\\' {
			b.WriteByte(ch)
			continue
		}
		i++
		if i >= len(v) {
			return errNotPlainBlock
		}
		switch v[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '"', '\\':
			b.WriteByte(v[i])
		case 'u':
			if i+4 >= len(v) {
				return errNotPlainBlock
			}
			r, err := strconv.ParseUint(v[i+1:i+5], 16, 32)
			if err != nil || (r >= 0xd800 && r < 0xe000) {
				return errNotPlainBlock
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			return errNotPlainBlock
		}
	}
	if i != len(v)-1 {
		return errNotPlainBlock // text after the closing quote, or none
	}
	c.out = appendJSONString(c.out, b.String())
	return nil
}

// literal converts a literal block ("|" or "|-") whose lines follow, more
// indented than indent.
func (c *blockConverter) literal(v string, indent int) error {
	if v != "|" && v != "|-" {
		return errNotPlainBlock
	}
	if c.pos >= len(c.lines) || c.lines[c.pos].indent <= indent {
		return errNotPlainBlock
	}
	blockIndent := c.lines[c.pos].indent
	// From the line after the header: blank lines before the first
	// line of text are the block's too.
	first := c.rawIndex[c.pos-1] + 1
	// The block runs to the last content line deeper than indent.
	for c.pos < len(c.lines) && c.lines[c.pos].indent > indent {
		if c.lines[c.pos].indent < blockIndent {
			return errNotPlainBlock
		}
		c.pos++
	}
	last := c.rawIndex[c.pos-1]
	// A line that looks like a comment after the last one is the block's
	// text in YAML, not a comment; such blocks go to the reference.
	end := len(c.raw)
	if c.pos < len(c.lines) {
		end = c.rawIndex[c.pos]
	}
	for i := last + 1; i < end; i++ {
		if strings.TrimSpace(c.raw[i]) != "" || len(c.raw[i]) > blockIndent {
			return errNotPlainBlock // text, or spaces that are text
		}
	}
	var b strings.Builder
	for i := first; i <= last; i++ {
		line := strings.TrimRight(c.raw[i], "\r")
		switch spaces := len(line) - len(strings.TrimLeft(line, " ")); {
		case strings.HasPrefix(line[spaces:], "#"):
			// Text in YAML, but skipped as a comment when the lines
			// were read: the reference decides.
			return errNotPlainBlock
		case strings.TrimSpace(line) == "":
			if len(line) > blockIndent {
				return errNotPlainBlock // spaces that are the block's text
			}
			line = ""
		case spaces < blockIndent:
			return errNotPlainBlock
		default:
			line = line[blockIndent:]
		}
		b.WriteString(line)
		if i < last || v == "|" && !(c.unterminated && i == len(c.raw)-1) {
			b.WriteByte('\n')
		}
	}
	c.out = appendJSONString(c.out, b.String())
	return nil
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		ch := s[i]
		if ch >= 0x20 && ch != '"' && ch != '\\' && ch < utf8.RuneSelf {
			i++
			continue
		}
		if ch >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch ch {
		case '"', '\\':
			b = append(b, '\\', ch)
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[ch>>4], "0123456789abcdef"[ch&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
