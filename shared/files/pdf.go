package files

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// MaxPDFPages bounds the pages of a PDF that are read for indexing.
const MaxPDFPages = 2000

var pdfBlank = regexp.MustCompile(`\n[ \t]*\n`)

// extractPDF reads the text of a PDF page by page (the text its content
// streams show, decoded through each font's encoding or ToUnicode map), as
// paragraphs at blank lines. Scanned pages (images only) have no text;
// text drawn glyph by glyph without spaces comes out without them (the
// library does not infer word gaps from positions). Encrypted PDFs are
// refused.
func extractPDF(data []byte) (blocks []Block, err error) {
	// The reader panics on some malformed files: a bad PDF is an indexing
	// failure, never a crash of the completion.
	defer func() {
		if r := recover(); r != nil {
			blocks, err = nil, fmt.Errorf("the PDF could not be read: %v", r)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("the PDF could not be read: %w", err)
	}
	n := r.NumPage()
	if n > MaxPDFPages {
		return nil, fmt.Errorf("the PDF has %d pages: at most %d are indexed", n, MaxPDFPages)
	}
	for i := 1; i <= n; i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		text, err := p.GetPlainText(nil)
		if err != nil {
			return nil, fmt.Errorf("the PDF's page %d could not be read: %w", i, err)
		}
		text = strings.ToValidUTF8(strings.ReplaceAll(string(normalizeNewlines([]byte(text))), "\x00", ""), "")
		for _, para := range pdfBlank.Split(text, -1) {
			// Lines of a paragraph as the PDF broke them: joined.
			para = strings.Join(strings.Fields(para), " ")
			if para != "" && utf8.ValidString(para) {
				blocks = append(blocks, Block{Kind: KindParagraph, Text: para})
			}
		}
	}
	if len(blocks) == 0 {
		return nil, errors.New("the PDF has no text (a scanned document needs OCR first)")
	}
	return blocks, nil
}
