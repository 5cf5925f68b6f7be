package vrl

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind int

const (
	tEOF tokKind = iota
	tNewline
	tIdent   // identifier or keyword
	tCall    // identifier immediately followed by "(" or "!("
	tString  // "..." (segments hold the template)
	tRawStr  // s'...'
	tInt     // integer literal
	tFloat   // float literal
	tOp      // operators and punctuation
	tField   // path field after "." that is not an identifier (e.g. digits)
	tInvalid // unexpected character
)

// segment is one part of a string literal: literal text or a {{ variable }}.
type segment struct {
	text     string
	variable bool
	pos      pos
}

type pos struct{ line, col int }

func (p pos) String() string { return fmt.Sprintf("%d:%d", p.line, p.col) }

type token struct {
	kind  tokKind
	text  string // identifier name, operator text, raw string value
	segs  []segment
	ival  int64
	fval  float64
	pos   pos
	space bool // whitespace (or a comment) precedes the token
	bang  bool // for tCall: written as name!(
}

// Error is a compile or runtime error with the position it refers to.
type Error struct {
	Line, Col int
	Msg       string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return "vrl: " + e.Msg
	}
	return fmt.Sprintf("vrl: %d:%d: %s", e.Line, e.Col, e.Msg)
}

func errAt(p pos, format string, args ...any) *Error {
	return &Error{Line: p.line, Col: p.col, Msg: fmt.Sprintf(format, args...)}
}

type lexer struct {
	src       string
	i         int
	line, col int
	toks      []token
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (l *lexer) pos() pos { return pos{l.line, l.col} }

func (l *lexer) advance(n int) {
	for k := 0; k < n && l.i < len(l.src); k++ {
		if l.src[l.i] == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
		l.i++
	}
}

func (l *lexer) peekAt(k int) byte {
	if l.i+k < len(l.src) {
		return l.src[l.i+k]
	}
	return 0
}

var twoOps = []string{"==", "!=", "<=", ">=", "&&", "||", "??", "->", "|="}

func lex(src string) ([]token, error) {
	l := &lexer{src: src, line: 1, col: 1}
	space := true
	for {
		// whitespace and comments
		for l.i < len(src) {
			c := src[l.i]
			if c == ' ' || c == '\t' || c == '\r' {
				l.advance(1)
				space = true
			} else if c == '\\' && l.peekAt(1) == '\n' { // line continuation
				l.advance(2)
				space = true
			} else if c == '#' {
				for l.i < len(src) && src[l.i] != '\n' {
					l.advance(1)
				}
				space = true
			} else {
				break
			}
		}
		p := l.pos()
		if l.i >= len(src) {
			l.toks = append(l.toks, token{kind: tEOF, pos: p, space: true})
			return l.toks, nil
		}
		c := src[l.i]
		tok := token{pos: p, space: space}
		space = false
		switch {
		case c == '\n':
			tok.kind = tNewline
			tok.text = "\n"
			l.advance(1)
			space = true
		case c == 's' && l.peekAt(1) == '\'':
			l.advance(2)
			var b strings.Builder
			for {
				if l.i >= len(src) {
					return nil, errAt(p, "unterminated raw string literal")
				}
				ch := src[l.i]
				if ch == '\\' && l.peekAt(1) == '\'' {
					b.WriteByte('\'')
					l.advance(2)
					continue
				}
				if ch == '\'' {
					l.advance(1)
					break
				}
				b.WriteByte(ch)
				l.advance(1)
			}
			tok.kind = tRawStr
			tok.text = b.String()
		case isIdentStart(c):
			start := l.i
			for l.i < len(src) && isIdentChar(src[l.i]) {
				l.advance(1)
			}
			tok.text = src[start:l.i]
			tok.kind = tIdent
			if tok.text == "_" {
				tok.kind = tOp
				break
			}
			if l.i < len(src) && src[l.i] == '(' {
				tok.kind = tCall
			} else if l.i+1 < len(src) && src[l.i] == '!' && src[l.i+1] == '(' {
				tok.kind = tCall
				tok.bang = true
				l.advance(1)
			}
		case isDigit(c):
			start := l.i
			for l.i < len(src) && (isDigit(src[l.i]) || src[l.i] == '_') {
				l.advance(1)
			}
			isFloat := false
			if l.i+1 < len(src) && src[l.i] == '.' && isDigit(src[l.i+1]) {
				isFloat = true
				l.advance(1)
				for l.i < len(src) && (isDigit(src[l.i]) || src[l.i] == '_') {
					l.advance(1)
				}
			}
			if l.i < len(src) && (src[l.i] == 'e' || src[l.i] == 'E') {
				j := 1
				if l.peekAt(1) == '+' || l.peekAt(1) == '-' {
					j = 2
				}
				if isDigit(l.peekAt(j)) {
					isFloat = true
					l.advance(j)
					for l.i < len(src) && isDigit(src[l.i]) {
						l.advance(1)
					}
				}
			}
			text := strings.ReplaceAll(src[start:l.i], "_", "")
			// A path field may start with digits (".0abc"); the parser
			// decides, the lexer keeps the text.
			if l.i < len(src) && isIdentStart(src[l.i]) {
				for l.i < len(src) && isIdentChar(src[l.i]) {
					l.advance(1)
				}
				tok.kind = tField
				tok.text = src[start:l.i]
				break
			}
			tok.text = text
			if isFloat {
				f, err := strconv.ParseFloat(text, 64)
				if err != nil {
					return nil, errAt(p, "invalid float literal %q", text)
				}
				tok.kind = tFloat
				tok.fval = f
			} else {
				n, err := strconv.ParseInt(text, 10, 64)
				if err != nil {
					return nil, errAt(p, "invalid integer literal %q", text)
				}
				tok.kind = tInt
				tok.ival = n
			}
		case c == '"':
			segs, err := l.lexString()
			if err != nil {
				return nil, err
			}
			tok.kind = tString
			tok.segs = segs
		default:
			tok.kind = tOp
			two := ""
			if l.i+1 < len(src) {
				two = src[l.i : l.i+2]
			}
			matched := false
			for _, op := range twoOps {
				if two == op {
					tok.text = op
					l.advance(2)
					matched = true
					break
				}
			}
			if !matched {
				if strings.IndexByte("+-*/<>!=&|?.,:;()[]{}_%", c) >= 0 {
					tok.text = string(c)
					l.advance(1)
				} else {
					r, size := utf8.DecodeRuneInString(src[l.i:])
					tok.kind = tInvalid
					tok.text = string(r)
					l.advance(size)
				}
			}
		}
		l.toks = append(l.toks, tok)
	}
}

// lexString reads a "..." literal starting at the opening quote, resolving
// escapes and splitting {{ variable }} template segments.
func (l *lexer) lexString() ([]segment, error) {
	start := l.pos()
	l.advance(1)
	var segs []segment
	var b strings.Builder
	litPos := l.pos()
	for {
		if l.i >= len(l.src) {
			return nil, errAt(start, "unterminated string literal")
		}
		c := l.src[l.i]
		switch {
		case c == '"':
			l.advance(1)
			if b.Len() > 0 || len(segs) == 0 {
				segs = append(segs, segment{text: b.String(), pos: litPos})
			}
			return segs, nil
		case c == '\\':
			ep := l.pos()
			e := l.peekAt(1)
			l.advance(2)
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case '\\':
				b.WriteByte('\\')
			case '"':
				b.WriteByte('"')
			case '\'':
				b.WriteByte('\'')
			case '0':
				b.WriteByte(0)
			case '{':
				b.WriteByte('{')
			case '}':
				b.WriteByte('}')
			case '\n':
				// escaped newline: line continuation inside the string
				for l.i < len(l.src) && (l.src[l.i] == ' ' || l.src[l.i] == '\t') {
					l.advance(1)
				}
			case 'u':
				if l.peekAt(0) != '{' {
					return nil, errAt(ep, "invalid unicode escape")
				}
				end := strings.IndexByte(l.src[l.i:], '}')
				if end < 0 || end > 8 {
					return nil, errAt(ep, "invalid unicode escape")
				}
				n, err := strconv.ParseUint(l.src[l.i+1:l.i+end], 16, 32)
				if err != nil || !utf8.ValidRune(rune(n)) {
					return nil, errAt(ep, "invalid unicode escape")
				}
				b.WriteRune(rune(n))
				l.advance(end + 1)
			default:
				return nil, errAt(ep, "invalid escape character \\%c", e)
			}
		case c == '{' && l.peekAt(1) == '{':
			tp := l.pos()
			end := strings.Index(l.src[l.i+2:], "}}")
			if end < 0 {
				return nil, errAt(tp, "unterminated template in string literal")
			}
			name := strings.TrimSpace(l.src[l.i+2 : l.i+2+end])
			if name == "" || !isIdentStart(name[0]) || strings.IndexFunc(name, func(r rune) bool { return r > 127 || !isIdentChar(byte(r)) }) >= 0 {
				return nil, errAt(tp, "invalid template variable %q (only variable names may appear in {{ }})", name)
			}
			if b.Len() > 0 {
				segs = append(segs, segment{text: b.String(), pos: litPos})
				b.Reset()
			}
			segs = append(segs, segment{text: name, variable: true, pos: tp})
			l.advance(end + 4)
			litPos = l.pos()
		default:
			b.WriteByte(c)
			l.advance(1)
		}
	}
}
