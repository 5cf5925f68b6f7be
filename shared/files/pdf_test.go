package files

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// samplePDF writes a small PDF as word processors do (Helvetica,
// WinAnsiEncoding, a content stream per page), each page's paragraphs in
// text objects of their own.
func samplePDF(pages ...[]string) []byte {
	var objs []string
	kids := []string{}
	n := len(pages)
	// 1 catalog, 2 pages, 3 font, then per page: page, contents.
	for i, paras := range pages {
		var c strings.Builder
		for j, p := range paras {
			p = strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`).Replace(p)
			fmt.Fprintf(&c, "BT /F1 12 Tf 72 %d Td T* (%s) Tj ET\n", 720-20*j, p)
		}
		page, content := 4+2*i, 5+2*i
		kids = append(kids, fmt.Sprintf("%d 0 R", page))
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 3 0 R >> >> >>", content),
			fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", c.Len(), c.String()))
	}
	objs = append([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), n),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
	}, objs...)
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	x := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, x)
	return b.Bytes()
}

// TestExtractPDF: a PDF's text, page by page, as paragraphs; a file that is
// not a PDF, or one without text, is an indexing failure, not a panic.
func TestExtractPDF(t *testing.T) {
	doc := samplePDF(
		[]string{"Employee handbook", "Holidays: every employee has 31 days of paid leave (a year)."},
		[]string{"The office opens at 8 in the morning."},
	)
	if !Indexable("application/pdf") {
		t.Fatal("PDF not indexable")
	}
	blocks, err := Extract("application/pdf", doc)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range blocks {
		got = append(got, b.Text)
	}
	want := []string{"Employee handbook", "Holidays: every employee has 31 days of paid leave (a year).", "The office opens at 8 in the morning."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("blocks: %q", got)
	}
	for _, bad := range [][]byte{[]byte("%PDF"), []byte("not a pdf at all"), doc[:len(doc)/2], samplePDF([]string{})} {
		if _, err := Extract("application/pdf", bad); err == nil {
			t.Fatalf("%q extracted", bad[:min(len(bad), 20)])
		}
	}
}
