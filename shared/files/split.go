package files

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/botforge/platform/shared/platform"
)

// Chunking configures how blocks become passages.
type Chunking struct {
	// MaxLength is the longest passage, in characters (default 1000).
	MaxLength int
	// MinParagraph merges a paragraph shorter than this many characters
	// into the next one (default 0: no merging).
	MinParagraph int
}

// DefaultMaxLength is the default longest passage.
const DefaultMaxLength = 1000

// MaxPassages bounds the passages of one file.
const MaxPassages = 5000

// ChunkingOf reads the chunking options of an upsert's indexing
// configuration (configuration.chunking.maximumChunkLength,
// configuration.parsing.minimumParagraphLength).
func ChunkingOf(indexing json.RawMessage) Chunking {
	var cfg struct {
		Configuration struct {
			Parsing struct {
				MinimumParagraphLength int `json:"minimumParagraphLength"`
			} `json:"parsing"`
			Chunking struct {
				MaximumChunkLength int `json:"maximumChunkLength"`
			} `json:"chunking"`
		} `json:"configuration"`
	}
	_ = json.Unmarshal(indexing, &cfg)
	return Chunking{MaxLength: cfg.Configuration.Chunking.MaximumChunkLength, MinParagraph: cfg.Configuration.Parsing.MinimumParagraphLength}
}

// PassageID is the id of the passage at position pos of a passage set.
func PassageID(set string, pos int) string { return fmt.Sprintf("psg_%s_%d", set, pos) }

// Passages turns blocks into the passages of set: headings stand alone and
// open a breadcrumb; mergeable blocks of one kind are joined up to the
// maximum length; longer text is cut at paragraph, line, sentence or word
// boundaries.
func Passages(set string, blocks []Block, opt Chunking) []platform.IndexedPassage {
	if opt.MaxLength <= 0 {
		opt.MaxLength = DefaultMaxLength
	}
	var out []platform.IndexedPassage
	var crumbs []Block // open headings, by level
	emit := func(kind, text string) {
		pos := len(out)
		crumb := make([]string, 0, len(crumbs))
		for _, c := range crumbs {
			crumb = append(crumb, c.Text)
		}
		out = append(out, platform.IndexedPassage{
			Passage: platform.Passage{
				ID:      PassageID(set, pos),
				Content: text,
				Meta:    platform.PassageMeta{Type: "chunk", Subtype: kind, Position: &pos},
			},
			Breadcrumb: strings.Join(crumb, " > "),
		})
	}
	var pending Block // text being accumulated
	flush := func() {
		if pending.Text != "" {
			for _, piece := range cut(pending.Text, opt.MaxLength) {
				emit(pending.Kind, piece)
			}
		}
		pending = Block{}
	}
	for _, b := range blocks {
		if b.Text == "" {
			continue
		}
		if b.Kind == KindTitle || b.Kind == KindSubtitle {
			flush()
			for len(crumbs) > 0 && crumbs[len(crumbs)-1].Level >= b.Level {
				crumbs = crumbs[:len(crumbs)-1]
			}
			emit(b.Kind, b.Text)
			crumbs = append(crumbs, b)
			continue
		}
		if pending.Text != "" {
			sep := "\n"
			if b.Kind == KindParagraph {
				sep = "\n\n"
			}
			// A paragraph shorter than the minimum is merged into the next
			// one (the result is cut again if too long).
			if pending.Kind == KindParagraph && b.Kind == KindParagraph && runes(pending.Text) < opt.MinParagraph {
				pending.Text += sep + b.Text
				continue
			}
			if pending.Merge && b.Merge && pending.Kind == b.Kind && runes(pending.Text)+len(sep)+runes(b.Text) <= opt.MaxLength {
				pending.Text += sep + b.Text
				continue
			}
			flush()
		}
		pending = b
	}
	flush()
	return out
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// cut splits text into pieces of at most max characters, preferring to cut
// after a blank line, then a line, a sentence, a word.
func cut(text string, max int) []string {
	var out []string
	for runes(text) > max {
		// Byte offset of the max-th rune.
		limit := len(text)
		n := 0
		for i := range text {
			if n == max {
				limit = i
				break
			}
			n++
		}
		window := text[:limit]
		at := -1
		for _, sep := range []string{"\n\n", "\n", ". ", "! ", "? ", "; ", ", ", " "} {
			if i := strings.LastIndex(window, sep); i > limit/3 {
				at = i + len(sep)
				break
			}
		}
		if at <= 0 {
			at = limit
		}
		if piece := strings.TrimSpace(text[:at]); piece != "" {
			out = append(out, piece)
		}
		text = strings.TrimSpace(text[at:])
	}
	if text = strings.TrimSpace(text); text != "" {
		out = append(out, text)
	}
	return out
}
