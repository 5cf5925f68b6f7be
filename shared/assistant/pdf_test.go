package assistant_test

import "github.com/botforge/platform/shared/files/pdftest"

// samplePDF is shared/files' test PDF (Helvetica, a text object per paragraph).
func samplePDF(pages ...[]string) []byte { return pdftest.Sample(pages...) }
