package files

import (
	"strings"
	"testing"

	"github.com/botforge/platform/shared/files/pdftest"
)

// samplePDF writes a small PDF as word processors do (pdftest.Sample).
func samplePDF(pages ...[]string) []byte { return pdftest.Sample(pages...) }

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
