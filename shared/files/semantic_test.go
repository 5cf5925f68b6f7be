package files

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randomVectors(n, dims int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		out[i] = v
	}
	return out
}

// Quantized similarities stay within 0.01 of the exact cosine.
func TestQuantizedCosine(t *testing.T) {
	vs := randomVectors(50, 384, 1)
	chunks := EncodeVectors("file_1", "set", vs)
	q := vs[7]
	sim := Score(chunks, q)
	if len(sim) != 50 {
		t.Fatalf("%d similarities", len(sim))
	}
	for i, v := range vs {
		var dot, na, nb float64
		for j := range v {
			dot += float64(v[j]) * float64(q[j])
			na += float64(v[j]) * float64(v[j])
			nb += float64(q[j]) * float64(q[j])
		}
		want := dot / math.Sqrt(na*nb)
		if got := sim[PassageKey{"file_1", "set", i}]; math.Abs(got-want) > 0.01 {
			t.Fatalf("passage %d: %f, exact %f", i, got, want)
		}
	}
	// Another dimension (an earlier model) is skipped, not misread.
	if got := Score(chunks, make([]float32, 10)); len(got) != 0 {
		t.Fatalf("dimension mismatch scored %d", len(got))
	}
}

// Chunks stay under MaxChunkBytes.
func TestEncodeVectorsChunks(t *testing.T) {
	chunks := EncodeVectors("f", "s", randomVectors(300, 1536, 3))
	n := 0
	for _, c := range chunks {
		if len(c.Data) > MaxChunkBytes || c.Start != n || len(c.Data) != c.Count*(4+1536) {
			t.Fatalf("chunk %+v (%d bytes)", c.Start, len(c.Data))
		}
		n += c.Count
	}
	if n != 300 {
		t.Fatalf("%d vectors in chunks", n)
	}
}

// Combine: a passage with both a lexical and a semantic match ranks
// first; a lexical-only hit keeps a share of its score.
func TestCombine(t *testing.T) {
	lex := []Hit{{FileID: "a", Set: "s", Position: 0, Score: 4}, {FileID: "a", Set: "s", Position: 1, Score: 2}}
	sim := Similar{{"a", "s", 1}: 0.9, {"b", "s", 0}: 0.8, {"a", "s", 0}: -0.2}
	got := Combine(lex, sim)
	if len(got) != 3 || got[0].Position != 1 || got[0].FileID != "a" || got[1].FileID != "b" || got[2].Position != 0 {
		t.Fatalf("combined %+v", got)
	}
	if want := 0.3*0.5 + 0.7*0.9; math.Abs(got[0].Score-want) > 1e-9 {
		t.Fatalf("score %f, want %f", got[0].Score, want)
	}
	if Combine(lex, nil)[0] != lex[0] {
		t.Fatal("no similarities: the lexical ranking as it is")
	}
}

// BenchmarkScore: one query against 10,000 passages of 1536 dimensions.
func BenchmarkScore(b *testing.B) {
	chunks := EncodeVectors("f", "s", randomVectors(10000, 1536, 4))
	q := randomVectors(1, 1536, 5)[0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Combine(nil, Score(chunks, q))
	}
}

// mostSimilar is the head of a full sort.
func TestMostSimilar(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	sim := Similar{}
	for i := range 1000 {
		sim[PassageKey{"f", "s", i}] = float64(rng.IntN(50)) / 50 // ties too
	}
	got := mostSimilar(sim, 20)
	all := mostSimilar(sim, len(sim))
	if len(got) != 20 || len(all) != 1000 {
		t.Fatalf("%d, %d", len(got), len(all))
	}
	for i := range got {
		if got[i] != all[i] {
			t.Fatalf("rank %d: %v, full order %v", i, got[i], all[i])
		}
		if i > 0 && (sim[all[i]] > sim[all[i-1]] || (sim[all[i]] == sim[all[i-1]] && lessKey(all[i], all[i-1]))) {
			t.Fatalf("not best first at %d", i)
		}
	}
}
