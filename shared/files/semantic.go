package files

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/botforge/platform/shared/platform"
)

// Semantic search (docs/files.md, "Semantic search"): passages embedded at
// indexing, their vectors int8-quantized in the platform's table, and
// searchFiles' BM25 ranking combined with the query's cosine similarity.
// A nil *Semantic is lexical search only.

// Limits of semantic search.
const (
	// MaxSearchVectors bounds the passages' vectors one search reads (the
	// bot's vector items in index order): passages past it are ranked
	// lexically only.
	MaxSearchVectors = 20000
	// MaxChunkBytes bounds one vector item's data (DynamoDB items are at
	// most 400 KB).
	MaxChunkBytes = 128 << 10
	// DefaultCacheBytes bounds the chunks a process keeps between
	// searches (about 85,000 vectors of 1536 dimensions).
	DefaultCacheBytes = 128 << 20
	// SemanticCandidates is how many of the most similar passages join
	// the lexical hits as candidates.
	SemanticCandidates = 200
	// SemanticWeight is the share of the cosine similarity in a combined
	// score; the rest is the BM25 score divided by the query's best.
	SemanticWeight = 0.7
)

// Embedder turns texts into vectors (shared/embeddings.Client).
type Embedder interface {
	Model() string
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// VectorStore keeps the vectors of passage sets (shared/dynamo).
type VectorStore interface {
	// PutVectors stores a passage set's vector chunks; they go with the
	// set (DeletePassageSet) and the file.
	PutVectors(ctx context.Context, f platform.FileRecord, chunks []platform.VectorChunk) error
	// VectorSets names a bot's vector chunks (without their data), at
	// most limit vectors; more reports that there were others.
	VectorSets(ctx context.Context, botID string, limit int) (chunks []platform.VectorChunk, more bool, err error)
	// VectorData reads the data of chunks VectorSets named (those no
	// longer stored are left out).
	VectorData(ctx context.Context, chunks []platform.VectorChunk) ([]platform.VectorChunk, error)
}

// Semantic is the embeddings model and where vectors are kept.
type Semantic struct {
	Embedder Embedder
	Store    VectorStore
	// Cache keeps chunks read by earlier searches (they never change);
	// nil: a cache of DefaultCacheBytes.
	Cache *ChunkCache

	once sync.Once
}

func (s *Semantic) cache() *ChunkCache {
	s.once.Do(func() {
		if s.Cache == nil {
			s.Cache = NewChunkCache(DefaultCacheBytes)
		}
	})
	return s.Cache
}

// EmbedError is a failure of the embeddings model (its reason is shown to
// the file's owner).
type EmbedError struct{ Err error }

func (e *EmbedError) Error() string { return "embedding the passages failed: " + e.Err.Error() }
func (e *EmbedError) Unwrap() error { return e.Err }

// Embed embeds a passage set's passages (in position order) into chunks.
func (s *Semantic) Embed(ctx context.Context, fileID, set string, passages []platform.IndexedPassage) ([]platform.VectorChunk, error) {
	if len(passages) == 0 {
		return nil, nil
	}
	texts := make([]string, len(passages))
	for i, p := range passages {
		texts[i] = p.Content
		if p.Breadcrumb != "" {
			// The headings say what the passage is about.
			texts[i] = p.Breadcrumb + "\n\n" + p.Content
		}
	}
	vs, err := s.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, &EmbedError{err}
	}
	if len(vs) != len(passages) {
		return nil, &EmbedError{fmt.Errorf("%d vectors for %d passages", len(vs), len(passages))}
	}
	return EncodeVectors(fileID, set, vs), nil
}

// EncodeVectors packs vectors (of positions 0..n-1) into chunks of at most
// MaxChunkBytes: each vector is normalized to unit length and quantized to
// int8 (value/max|value|*127) after its float32 little-endian scale
// (max|value|/127), so a 1536-dimension vector takes 1540 bytes.
func EncodeVectors(fileID, set string, vs [][]float32) []platform.VectorChunk {
	if len(vs) == 0 {
		return nil
	}
	dims := len(vs[0])
	per := max(1, MaxChunkBytes/(4+dims))
	var out []platform.VectorChunk
	for start := 0; start < len(vs); start += per {
		n := min(per, len(vs)-start)
		data := make([]byte, 0, n*(4+dims))
		for _, v := range vs[start : start+n] {
			data = appendQuantized(data, v)
		}
		out = append(out, platform.VectorChunk{FileID: fileID, Set: set, Start: start, Count: n, Dims: dims, Data: data})
	}
	return out
}

func appendQuantized(b []byte, v []float32) []byte {
	var norm, peak float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	norm = math.Sqrt(norm)
	if norm == 0 {
		norm = 1
	}
	for _, x := range v {
		peak = max(peak, math.Abs(float64(x)/norm))
	}
	scale := float32(peak / 127)
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(scale))
	for _, x := range v {
		q := 0.0
		if peak > 0 {
			q = math.Round(float64(x) / norm / peak * 127)
		}
		b = append(b, byte(int8(q)))
	}
	return b
}

// errChunk is a stored chunk that does not decode (a bug or a
// corruption): it is skipped.
var errChunk = errors.New("malformed vector chunk")

// similarities adds the cosine similarity of query (unit length,
// quantized like the passages: int8 values and their scale) to each
// passage of chunk: an integer dot product, four values a step.
func similarities(chunk platform.VectorChunk, query []int8, qscale float32, add func(pos int, sim float64)) error {
	size := 4 + chunk.Dims
	if chunk.Dims != len(query) || len(chunk.Data) != chunk.Count*size {
		return errChunk
	}
	for i := 0; i < chunk.Count; i++ {
		rec := chunk.Data[i*size : (i+1)*size]
		scale := math.Float32frombits(binary.LittleEndian.Uint32(rec))
		v := rec[4:]
		v = v[:len(query)]
		var d0, d1, d2, d3 int32
		j := 0
		for ; j+4 <= len(query); j += 4 {
			d0 += int32(int8(v[j])) * int32(query[j])
			d1 += int32(int8(v[j+1])) * int32(query[j+1])
			d2 += int32(int8(v[j+2])) * int32(query[j+2])
			d3 += int32(int8(v[j+3])) * int32(query[j+3])
		}
		for ; j < len(query); j++ {
			d0 += int32(int8(v[j])) * int32(query[j])
		}
		add(chunk.Start+i, float64(float32(d0+d1+d2+d3)*scale*qscale))
	}
	return nil
}

// quantize is appendQuantized's encoding of one vector, unpacked.
func quantize(v []float32) ([]int8, float32) {
	b := appendQuantized(nil, v)
	q := make([]int8, len(v))
	for i, x := range b[4:] {
		q[i] = int8(x)
	}
	return q, math.Float32frombits(binary.LittleEndian.Uint32(b))
}

// PassageKey names a passage of a file's passage set.
type PassageKey struct {
	FileID, Set string
	Position    int
}

// Similar is the cosine similarity of a query to a bot's passages (those
// with vectors, at most MaxSearchVectors).
type Similar map[PassageKey]float64

// Similarities embeds the query and scores the bot's passages; nil (no
// call to the model) when the bot has no vectors.
func (s *Semantic) Similarities(ctx context.Context, botID, query string) (Similar, error) {
	refs, _, err := s.Store.VectorSets(ctx, botID, MaxSearchVectors)
	if err != nil || len(refs) == 0 {
		return nil, err
	}
	qv, err := s.Embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, &EmbedError{err}
	}
	if len(qv) != 1 {
		return nil, &EmbedError{fmt.Errorf("%d vectors for one query", len(qv))}
	}
	chunks, err := s.chunks(ctx, refs)
	if err != nil {
		return nil, err
	}
	return Score(chunks, qv[0]), nil
}

// chunks returns the data of the chunks refs names: from the cache, the
// others read (and cached).
func (s *Semantic) chunks(ctx context.Context, refs []platform.VectorChunk) ([]platform.VectorChunk, error) {
	c := s.cache()
	out := make([]platform.VectorChunk, 0, len(refs))
	var missing []platform.VectorChunk
	for _, r := range refs {
		if got, ok := c.get(r); ok {
			out = append(out, got)
		} else {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		got, err := s.Store.VectorData(ctx, missing)
		if err != nil {
			return nil, err
		}
		for _, g := range got {
			c.put(g)
		}
		out = append(out, got...)
	}
	return out, nil
}

// Score computes the similarity of query to every passage of chunks
// (chunks of another dimension, e.g. from an earlier model, are skipped).
func Score(chunks []platform.VectorChunk, query []float32) Similar {
	q, qscale := quantize(query)
	n := 0
	for _, c := range chunks {
		n += c.Count
	}
	out := make(Similar, n)
	for _, c := range chunks {
		_ = similarities(c, q, qscale, func(pos int, sim float64) {
			out[PassageKey{c.FileID, c.Set, pos}] = sim
		})
	}
	return out
}

// Combine merges lexical hits (Rank, best first) with the similarities:
// the candidates are every lexical hit and the SemanticCandidates most
// similar passages; each scores
//
//	SemanticWeight*max(cosine, 0) + (1-SemanticWeight)*bm25/best bm25
//
// (a passage without a vector counts cosine 0, one without the query's
// terms bm25 0). Best first.
func Combine(lex []Hit, sim Similar) []Hit {
	if sim == nil {
		return lex
	}
	best := 0.0
	for _, h := range lex {
		best = max(best, h.Score)
	}
	byKey := make(map[PassageKey]float64, len(lex)+SemanticCandidates)
	for _, h := range lex {
		byKey[PassageKey{h.FileID, h.Set, h.Position}] = (1 - SemanticWeight) * h.Score / best
	}
	for _, k := range mostSimilar(sim, SemanticCandidates) {
		if _, ok := byKey[k]; !ok {
			byKey[k] = 0
		}
	}
	out := make([]Hit, 0, len(byKey))
	for k, s := range byKey {
		out = append(out, Hit{FileID: k.FileID, Set: k.Set, Position: k.Position, Score: s + SemanticWeight*max(sim[k], 0)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return lessKey(PassageKey{out[i].FileID, out[i].Set, out[i].Position}, PassageKey{out[j].FileID, out[j].Set, out[j].Position})
	})
	return out
}

func lessKey(a, b PassageKey) bool {
	if a.FileID != b.FileID {
		return a.FileID < b.FileID
	}
	if a.Set != b.Set {
		return a.Set < b.Set
	}
	return a.Position < b.Position
}

// ChunkCache keeps vector chunks by identity (file, set, start), evicting
// the least recently used past its byte budget. Chunks are immutable, so
// a cached one is never stale; one whose set was deleted is simply no
// longer named by the manifests and ages out.
type ChunkCache struct {
	mu    sync.Mutex
	max   int
	size  int
	tick  uint64
	items map[chunkID]*cached
}

type chunkID struct {
	file, set string
	start     int
}

type cached struct {
	c    platform.VectorChunk
	used uint64
}

// NewChunkCache returns a cache of at most maxBytes of vector data.
func NewChunkCache(maxBytes int) *ChunkCache {
	return &ChunkCache{max: maxBytes, items: map[chunkID]*cached{}}
}

func (c *ChunkCache) get(r platform.VectorChunk) (platform.VectorChunk, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[chunkID{r.FileID, r.Set, r.Start}]
	if !ok {
		return r, false
	}
	c.tick++
	e.used = c.tick
	return e.c, true
}

func (c *ChunkCache) put(v platform.VectorChunk) {
	if len(v.Data) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := chunkID{v.FileID, v.Set, v.Start}
	if _, ok := c.items[id]; ok {
		return
	}
	for c.size+len(v.Data) > c.max {
		// Evict the least recently used (a linear pass: the cache holds
		// at most a few thousand chunks).
		var old chunkID
		var oldest *cached
		for k, e := range c.items {
			if oldest == nil || e.used < oldest.used {
				old, oldest = k, e
			}
		}
		c.size -= len(oldest.c.Data)
		delete(c.items, old)
	}
	c.tick++
	c.items[id] = &cached{c: v, used: c.tick}
	c.size += len(v.Data)
}

// mostSimilar returns the n passages of sim most similar, best first: a
// bounded min-heap over one pass (no sort of every passage).
func mostSimilar(sim Similar, n int) []PassageKey {
	type entry struct {
		k PassageKey
		s float64
	}
	worse := func(a, b entry) bool { // a ranks below b
		if a.s != b.s {
			return a.s < b.s
		}
		return lessKey(b.k, a.k)
	}
	h := make([]entry, 0, n)
	down := func(i int) {
		for {
			l, m := 2*i+1, i
			if l < len(h) && worse(h[l], h[m]) {
				m = l
			}
			if r := l + 1; r < len(h) && worse(h[r], h[m]) {
				m = r
			}
			if m == i {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for k, s := range sim {
		e := entry{k, s}
		if len(h) < n {
			h = append(h, e)
			for i := len(h) - 1; i > 0 && worse(h[i], h[(i-1)/2]); i = (i - 1) / 2 {
				h[i], h[(i-1)/2] = h[(i-1)/2], h[i]
			}
			continue
		}
		if n > 0 && worse(h[0], e) {
			h[0] = e
			down(0)
		}
	}
	sort.Slice(h, func(i, j int) bool { return worse(h[j], h[i]) })
	out := make([]PassageKey, len(h))
	for i, e := range h {
		out[i] = e.k
	}
	return out
}
