// Package pdftest writes small PDFs for tests of text extraction and
// indexing (shared/files, shared/assistant).
package pdftest

import (
	"bytes"
	"fmt"
	"strings"
)

// Sample writes a small PDF as word processors do (Helvetica,
// WinAnsiEncoding, a content stream per page), each page's paragraphs in
// text objects of their own.
func Sample(pages ...[]string) []byte {
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
