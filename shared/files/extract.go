package files

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Block kinds: the passage subtypes of the reference that text formats have.
const (
	KindTitle      = "title"
	KindSubtitle   = "subtitle"
	KindParagraph  = "paragraph"
	KindList       = "list"
	KindCode       = "code"
	KindTable      = "table"
	KindBlockquote = "blockquote"
)

// Block is a structural piece of a document: a heading, a paragraph, a list
// item, a table row... Blocks marked Merge (lines of a list, table rows,
// records) are joined with their neighbours of the same kind into passages.
type Block struct {
	Kind  string
	Text  string
	Level int // headings: 1 for a title, 2.. for subtitles
	Merge bool
}

// ErrUnsupported is the indexing failure of a content type that has no text
// extractor.
var ErrUnsupported = errors.New("unsupported content type")

// Indexable reports whether files of content type ct can be indexed.
func Indexable(ct string) bool { return extractorOf(MediaType(ct)) != nil }

func extractorOf(mt string) func([]byte) ([]Block, error) {
	switch {
	case mt == "text/markdown" || mt == "text/x-markdown":
		return extractMarkdown
	case mt == "text/html" || mt == "application/xhtml+xml":
		return extractHTML
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return extractJSON
	case mt == "text/csv":
		return func(b []byte) ([]Block, error) { return extractCSV(b, ',') }
	case mt == "text/tab-separated-values":
		return func(b []byte) ([]Block, error) { return extractCSV(b, '\t') }
	case strings.HasPrefix(mt, "text/"):
		return extractPlain
	case mt == "application/pdf":
		return extractPDF
	}
	return nil
}

// Extract returns the blocks of a document of content type ct. Supported:
// plain text (any text/*), Markdown, HTML, JSON and CSV/TSV, in UTF-8, and
// PDF (pdf.go).
func Extract(ct string, data []byte) ([]Block, error) {
	ex := extractorOf(MediaType(ct))
	if ex == nil {
		return nil, fmt.Errorf("%w %q: indexing supports plain text, Markdown, HTML, JSON, CSV and PDF", ErrUnsupported, MediaType(ct))
	}
	if MediaType(ct) == "application/pdf" {
		return ex(data) // binary: its text is decoded by the PDF's fonts
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(data) {
		return nil, errors.New("the content is not valid UTF-8 text")
	}
	return ex(normalizeNewlines(data))
}

func normalizeNewlines(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
}

// extractPlain splits text into paragraphs at blank lines.
func extractPlain(data []byte) ([]Block, error) {
	var out []Block
	for _, p := range regexp.MustCompile(`\n[ \t]*\n`).Split(string(data), -1) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, Block{Kind: KindParagraph, Text: p})
		}
	}
	return out, nil
}

var (
	mdHeading = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$`)
	mdList    = regexp.MustCompile(`^ {0,3}([-*+]|\d{1,9}[.)])[ \t]`)
	mdFence   = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	mdSetext  = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
)

// extractMarkdown reads headings, fenced code, lists, block quotes, tables
// and paragraphs; passages keep their Markdown.
func extractMarkdown(data []byte) ([]Block, error) {
	var out []Block
	var para []string
	kind := ""
	flush := func() {
		if len(para) > 0 {
			text := strings.TrimSpace(strings.Join(para, "\n"))
			if text != "" {
				out = append(out, Block{Kind: kind, Text: text, Merge: kind == KindList || kind == KindTable})
			}
		}
		para, kind = nil, ""
	}
	add := func(k, line string) {
		if kind != k {
			flush()
			kind = k
		}
		para = append(para, line)
	}
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		switch {
		case mdFence.MatchString(line):
			flush()
			fence := mdFence.FindStringSubmatch(line)[1]
			code := []string{line}
			for i++; i < len(lines); i++ {
				code = append(code, lines[i])
				if strings.HasPrefix(strings.TrimSpace(lines[i]), fence[:3]) {
					break
				}
			}
			out = append(out, Block{Kind: KindCode, Text: strings.Join(code, "\n")})
		case trimmed == "":
			flush()
		case mdHeading.MatchString(line):
			flush()
			m := mdHeading.FindStringSubmatch(line)
			out = append(out, heading(len(m[1]), m[2]))
		case kind == KindParagraph && len(para) == 1 && mdSetext.MatchString(line):
			level := 2
			if strings.HasPrefix(trimmed, "=") {
				level = 1
			}
			text := para[0]
			para, kind = nil, ""
			out = append(out, heading(level, text))
		case mdList.MatchString(line) || (kind == KindList && strings.HasPrefix(line, " ")):
			add(KindList, line)
		case strings.HasPrefix(trimmed, ">"):
			add(KindBlockquote, line)
		case strings.HasPrefix(trimmed, "|"):
			add(KindTable, line)
		default:
			if kind != KindParagraph && kind != "" {
				flush()
			}
			kind = KindParagraph
			para = append(para, line)
		}
	}
	flush()
	return out, nil
}

func heading(level int, text string) Block {
	kind := KindSubtitle
	if level == 1 {
		kind = KindTitle
	}
	return Block{Kind: kind, Text: strings.TrimSpace(text), Level: level}
}

// extractHTML reads an HTML document's text by its block elements: h1 is a
// title, h2-h6 subtitles, li list items, pre code, blockquote quotes, table
// rows (cells joined by " | "); script, style and similar content is
// dropped.
func extractHTML(data []byte) ([]Block, error) {
	x := &htmlExtractor{}
	s := string(data)
	for len(s) > 0 {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			x.text(s)
			break
		}
		x.text(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "<!--"):
			s = skipPast(s, "-->")
		case strings.HasPrefix(s, "<!") || strings.HasPrefix(s, "<?"):
			s = skipPast(s, ">")
		default:
			name, end, rest, ok := readTag(s)
			if !ok {
				x.text("<")
				s = s[1:]
				continue
			}
			s = rest
			if !end && rawTextElements[name] {
				// Skip to the matching end tag.
				j := strings.Index(strings.ToLower(s), "</"+name)
				if j < 0 {
					s = ""
				} else {
					s = skipPast(s[j:], ">")
				}
				continue
			}
			x.tag(name, end)
		}
	}
	x.flush()
	return x.out, nil
}

// rawTextElements' content is not text of the document.
var rawTextElements = map[string]bool{"script": true, "style": true, "noscript": true, "template": true, "svg": true, "title": true, "iframe": true, "object": true}

var htmlBlockElements = map[string]bool{
	"p": true, "div": true, "section": true, "article": true, "header": true, "footer": true, "main": true,
	"aside": true, "nav": true, "br": true, "li": true, "ul": true, "ol": true, "pre": true, "blockquote": true,
	"table": true, "tr": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"hr": true, "dl": true, "dt": true, "dd": true, "figure": true, "figcaption": true, "form": true,
	"body": true, "html": true, "address": true, "details": true, "summary": true, "caption": true,
}

func skipPast(s, marker string) string {
	if i := strings.Index(s, marker); i >= 0 {
		return s[i+len(marker):]
	}
	return ""
}

// readTag reads "<name ...>" or "</name>" at the start of s.
func readTag(s string) (name string, end bool, rest string, ok bool) {
	i := 1
	if i < len(s) && s[i] == '/' {
		end = true
		i++
	}
	j := i
	for j < len(s) && (isASCIILetter(s[j]) || (j > i && s[j] >= '0' && s[j] <= '9')) {
		j++
	}
	if j == i {
		return "", false, s, false
	}
	name = strings.ToLower(s[i:j])
	// Skip attributes, honouring quotes.
	var quote byte
	for ; j < len(s); j++ {
		c := s[j]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return name, end, s[j+1:], true
		}
	}
	return name, end, "", true
}

func isASCIILetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

type htmlExtractor struct {
	out   []Block
	buf   strings.Builder
	stack []string // open elements that decide the kind of text
	table strings.Builder
	cells int // cells in the current table row
}

func (x *htmlExtractor) in(names ...string) string {
	for i := len(x.stack) - 1; i >= 0; i-- {
		for _, n := range names {
			if x.stack[i] == n {
				return n
			}
		}
	}
	return ""
}

func (x *htmlExtractor) text(s string) {
	if s == "" {
		return
	}
	s = html.UnescapeString(s)
	if x.in("pre") == "" {
		// Collapse white space, keeping one space at either end so that
		// words around inline tags stay apart.
		collapsed := strings.Join(strings.Fields(s), " ")
		if collapsed == "" {
			collapsed = " "
		} else {
			if r, _ := utf8.DecodeRuneInString(s); unicode.IsSpace(r) {
				collapsed = " " + collapsed
			}
			if r, _ := utf8.DecodeLastRuneInString(s); unicode.IsSpace(r) {
				collapsed += " "
			}
		}
		s = collapsed
	}
	if x.in("table") != "" && x.in("caption") == "" {
		x.table.WriteString(s)
		return
	}
	x.buf.WriteString(s)
}

func (x *htmlExtractor) flush() {
	text := x.buf.String()
	if x.in("pre") == "" {
		text = strings.Join(strings.Fields(text), " ")
	}
	text = strings.TrimSpace(text)
	x.buf.Reset()
	if text == "" {
		return
	}
	switch k := x.in("h1", "h2", "h3", "h4", "h5", "h6", "li", "pre", "blockquote", "dt", "dd"); k {
	case "h1", "h2", "h3", "h4", "h5", "h6":
		x.out = append(x.out, heading(int(k[1]-'0'), text))
	case "li", "dt", "dd":
		x.out = append(x.out, Block{Kind: KindList, Text: "- " + text, Merge: true})
	case "pre":
		x.out = append(x.out, Block{Kind: KindCode, Text: text})
	case "blockquote":
		x.out = append(x.out, Block{Kind: KindBlockquote, Text: text})
	default:
		x.out = append(x.out, Block{Kind: KindParagraph, Text: text})
	}
}

func (x *htmlExtractor) tag(name string, end bool) {
	if x.in("table") != "" && name != "table" {
		switch {
		case (name == "td" || name == "th") && !end:
			if x.cells > 0 {
				x.table.WriteString(" | ")
			}
			x.cells++
			return
		case name == "tr" && end:
			row := strings.TrimSpace(x.table.String())
			x.table.Reset()
			x.cells = 0
			if row != "" {
				x.out = append(x.out, Block{Kind: KindTable, Text: row, Merge: true})
			}
			return
		case name != "caption":
			return
		}
	}
	if !htmlBlockElements[name] && name != "td" && name != "th" && name != "caption" {
		return
	}
	x.flush()
	if name == "table" && end {
		if row := strings.TrimSpace(x.table.String()); row != "" {
			x.out = append(x.out, Block{Kind: KindTable, Text: row, Merge: true})
		}
		x.table.Reset()
		x.cells = 0
	}
	if voidElement(name) {
		return
	}
	if end {
		for i := len(x.stack) - 1; i >= 0; i-- {
			if x.stack[i] == name {
				x.stack = x.stack[:i]
				break
			}
		}
		return
	}
	x.stack = append(x.stack, name)
}

func voidElement(name string) bool { return name == "br" || name == "hr" }

// extractJSON flattens a JSON document into "path: value" lines: one block
// per element of a top-level array or per top-level key of an object.
func extractJSON(data []byte) ([]Block, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the content is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the content is not valid JSON: data after the top-level value")
	}
	var out []Block
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			if s := flattenJSON("", e); s != "" {
				out = append(out, Block{Kind: KindParagraph, Text: s, Merge: true})
			}
		}
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if s := flattenJSON(k, t[k]); s != "" {
				out = append(out, Block{Kind: KindParagraph, Text: s, Merge: true})
			}
		}
	default:
		if s := flattenJSON("", v); s != "" {
			out = append(out, Block{Kind: KindParagraph, Text: s})
		}
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func flattenJSON(path string, v any) string {
	var lines []string
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(t) {
				walk(joinPath(p, k), t[k])
			}
		case []any:
			for i, e := range t {
				walk(fmt.Sprintf("%s[%d]", p, i), e)
			}
		case nil:
		case string:
			lines = append(lines, label(p, t))
		default:
			lines = append(lines, label(p, fmt.Sprint(t)))
		}
	}
	walk(path, v)
	return strings.Join(lines, "\n")
}

func joinPath(p, k string) string {
	if p == "" {
		return k
	}
	return p + "." + k
}

func label(p, v string) string {
	if p == "" {
		return v
	}
	return p + ": " + v
}

// extractCSV turns each record into "column: value; ..." using the header
// row's names.
func extractCSV(data []byte, comma rune) ([]Block, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.Comma = comma
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	header, err := r.Read()
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the content is not valid CSV: %v", err)
	}
	var out []Block
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the content is not valid CSV: %v", err)
		}
		var cells []string
		for i, v := range rec {
			if v = strings.TrimSpace(v); v == "" {
				continue
			}
			name := fmt.Sprintf("column %d", i+1)
			if i < len(header) && strings.TrimSpace(header[i]) != "" {
				name = strings.TrimSpace(header[i])
			}
			cells = append(cells, name+": "+v)
		}
		if len(cells) > 0 {
			out = append(out, Block{Kind: KindTable, Text: strings.Join(cells, "; "), Merge: true})
		}
	}
	return out, nil
}
