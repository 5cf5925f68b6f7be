package tables

import (
	"fmt"
	"math"
	"strings"
	"unicode"

	"github.com/botforge/platform/shared/platform"
)

// maxSearchTerms bounds the words of a search that count.
const maxSearchTerms = 32

// Search ranks rows by how well their searchable columns match words.
//
// Relevance is lexical: the search and the row's searchable text are cut
// into lower-case words; each search word scores 1 when the row has it, 0.8
// when a row word starts with it, 0.6 when a row word contains it, 0.5
// when a row word is one edit away (for words of 4 letters or more), and 0
// otherwise. The similarity is 0.9 times the mean word score, plus 0.1
// when the row's text holds the whole search as a phrase (for one word:
// the exact word). It is in [0,1]; rows that match no word have 0 and
// still come, after the others, as the reference allows.
type Search struct {
	terms    []string
	phrase   string
	cols     []*Column
	warnings []string
	words    []string // Score's buffer
}

// ParseSearch prepares a search over the schema's searchable columns
// (x-zui.searchable); a table without any searches all its string
// columns, with a warning. A search without any word is nil, with a
// warning.
func ParseSearch(q string, s *Schema) (*Search, error) {
	se := &Search{}
	words := tokenize(q)
	if len(words) == 0 {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, w := range words {
		if !seen[w] {
			seen[w] = true
			se.terms = append(se.terms, w)
		}
	}
	if len(se.terms) > maxSearchTerms {
		se.warnings = append(se.warnings, fmt.Sprintf("search: only the first %d words are used", maxSearchTerms))
		se.terms = se.terms[:maxSearchTerms]
	}
	se.phrase = strings.Join(words, " ")
	for _, c := range s.Columns {
		if c.Searchable {
			se.cols = append(se.cols, c)
		}
	}
	if len(se.cols) == 0 {
		for _, c := range s.Columns {
			if c.Type == TypeString {
				se.cols = append(se.cols, c)
			}
		}
		if len(se.cols) == 0 {
			return nil, platform.Invalid("invalid search: the table has no column to search (no searchable or string column)")
		}
		se.warnings = append(se.warnings, "search: no column is marked searchable (x-zui.searchable); every string column was searched")
	}
	return se, nil
}

// Warnings are remarks on the search.
func (se *Search) Warnings() []string { return se.warnings }

// tokenize cuts text into lower-case words of letters and digits.
func tokenize(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// Score is the row's similarity to the search, in [0,1]. A Search scores
// the rows of one request, one at a time (it reuses its buffers).
func (se *Search) Score(r *platform.TableRow) float64 {
	words := se.words[:0]
	for _, c := range se.cols {
		raw, ok := r.Values[c.ID]
		if !ok {
			continue
		}
		if c.Type == TypeString {
			if s, ok := decodeValue(raw).(string); ok {
				words = appendWords(words, s)
			}
			continue
		}
		var text []string
		collectStrings(decodeValue(raw), &text)
		for _, t := range text {
			words = appendWords(words, t)
		}
	}
	se.words = words
	if len(words) == 0 {
		return 0
	}
	total, exact := 0.0, 0
	for _, t := range se.terms {
		ts := termScore(t, words)
		total += ts
		if ts == 1 {
			exact++
		}
	}
	if total == 0 {
		return 0
	}
	score := 0.9 * total / float64(len(se.terms))
	switch {
	case len(se.terms) == 1:
		if exact == 1 {
			score += 0.1
		}
	case exact == len(se.terms) && strings.Contains(" "+strings.Join(words, " ")+" ", " "+se.phrase+" "):
		score += 0.1
	}
	return math.Round(math.Min(score, 1)*10000) / 10000
}

// appendWords appends the lower-case words (letters and digits) of text.
func appendWords(dst []string, text string) []string {
	text = strings.ToLower(text)
	start := -1
	for i, r := range text {
		word := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			dst = append(dst, text[start:i])
			start = -1
		}
	}
	if start >= 0 {
		dst = append(dst, text[start:])
	}
	return dst
}

func termScore(t string, words []string) float64 {
	best := 0.0
	for _, w := range words {
		switch {
		case w == t:
			return 1
		case best >= 0.8:
		case len(t) >= 2 && strings.HasPrefix(w, t):
			best = 0.8
		case best >= 0.6:
		case len(t) >= 3 && strings.Contains(w, t):
			best = 0.6
		case best < 0.5 && len(t) >= 4 && oneEditAway(t, w):
			best = 0.5
		}
	}
	return best
}

// oneEditAway reports whether a and b differ by one insertion, deletion,
// substitution or swap of adjacent letters.
func oneEditAway(a, b string) bool {
	ra, rb := []rune(a), []rune(b)
	la, lb := len(ra), len(rb)
	if la-lb > 1 || lb-la > 1 {
		return false
	}
	i := 0
	for i < la && i < lb && ra[i] == rb[i] {
		i++
	}
	if i == la && i == lb {
		return true
	}
	switch {
	case la == lb:
		if string(ra[i+1:]) == string(rb[i+1:]) {
			return true // substitution
		}
		return i+1 < la && ra[i] == rb[i+1] && ra[i+1] == rb[i] && string(ra[i+2:]) == string(rb[i+2:])
	case la > lb:
		return string(ra[i+1:]) == string(rb[i:])
	}
	return string(ra[i:]) == string(rb[i+1:])
}

func collectStrings(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case map[string]any:
		for _, k := range sortedKeys(x) {
			collectStrings(x[k], out)
		}
	case []any:
		for _, e := range x {
			collectStrings(e, out)
		}
	}
}
