package files

import (
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/botforge/platform/shared/platform"
)

// Search index limits (docs/files.md).
const (
	// MaxQueryTerms bounds the distinct terms of a search query.
	MaxQueryTerms = 16
	// MaxTermBytes bounds an index term (longer words are not indexed).
	MaxTermBytes = 64
	// MaxPostingsPerTerm bounds the files read for one query term; a term
	// in more files than this says little about relevance and is dropped
	// from the query when other terms remain.
	MaxPostingsPerTerm = 1000
)

var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be but by for from has have he her his i if in into is it its
		of on or our she so than that the their them then there these they this to was we were what when where which
		who will with you your le la les de des du et un une en est`) {
		stopWords[w] = true
	}
}

// Terms returns the index terms of text in order: lowercased runs of
// letters and digits, lightly stemmed (plural endings), without stop words
// or terms longer than MaxTermBytes.
func Terms(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if len(w) > MaxTermBytes || stopWords[w] {
			continue
		}
		if len(w) == 1 && !unicode.IsDigit(rune(w[0])) {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// stem folds common English plural endings so "files" finds "file".
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

// QueryTerms returns the distinct terms of a query, at most MaxQueryTerms.
func QueryTerms(q string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range Terms(q) {
		if !seen[t] && len(out) < MaxQueryTerms {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// Postings builds the search index entries of a passage set: for each
// term, the passages holding it, how often, and their lengths.
func Postings(passages []platform.IndexedPassage) []platform.Posting {
	byTerm := map[string][]platform.PostingHit{}
	for _, p := range passages {
		terms := Terms(p.Content)
		counts := map[string]int{}
		for _, t := range terms {
			counts[t]++
		}
		pos := 0
		if p.Meta.Position != nil {
			pos = *p.Meta.Position
		}
		for t, n := range counts {
			byTerm[t] = append(byTerm[t], platform.PostingHit{Position: pos, Count: n, Length: len(terms)})
		}
	}
	out := make([]platform.Posting, 0, len(byTerm))
	for t, hits := range byTerm {
		sort.Slice(hits, func(i, j int) bool { return hits[i].Position < hits[j].Position })
		out = append(out, platform.Posting{Term: t, Hits: hits})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Term < out[j].Term })
	return out
}

// Hit is a scored passage.
type Hit struct {
	FileID, Set string
	Position    int
	Score       float64
}

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Rank scores passages with BM25 over the postings of the query's terms
// (term -> postings) and returns them best first. The collection is what
// the postings reach: N is the passage count of every file set they name.
func Rank(byTerm map[string][]platform.FilePosting) []Hit {
	type pkey struct {
		file, set string
		pos       int
	}
	sets := map[[2]string]int{}
	totalLen, nLen := 0, 0
	for _, ps := range byTerm {
		for _, p := range ps {
			sets[[2]string{p.FileID, p.Set}] = p.Passages
			for _, h := range p.Hits {
				totalLen += h.Length
				nLen++
			}
		}
	}
	n := 0
	for _, c := range sets {
		n += c
	}
	if nLen == 0 {
		return nil
	}
	avg := float64(totalLen) / float64(nLen)
	scores := map[pkey]float64{}
	for _, ps := range byTerm {
		df := 0
		for _, p := range ps {
			df += len(p.Hits)
		}
		idf := math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
		for _, p := range ps {
			for _, h := range p.Hits {
				tf := float64(h.Count)
				norm := tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*float64(h.Length)/avg))
				scores[pkey{p.FileID, p.Set, h.Position}] += idf * norm
			}
		}
	}
	out := make([]Hit, 0, len(scores))
	for k, s := range scores {
		out = append(out, Hit{FileID: k.file, Set: k.set, Position: k.pos, Score: s})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		if a.FileID != b.FileID {
			return a.FileID < b.FileID
		}
		return a.Position < b.Position
	})
	return out
}
