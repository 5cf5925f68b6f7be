package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Vector items (semantic search, docs/files.md): a passage set's
// embeddings in chunks under the file's partition (VEC#<set>#<start>), so
// they go with the set and the file, and one small manifest per set
// (VEC#<set>#M) in the bot's gsi1 partition BOT#<bot>#FVEC naming the
// chunks: a search queries the manifests (a few hundred bytes per file)
// and reads only the chunks its cache lacks (chunks never change: a new
// passage set has new ones).
const (
	attrVCount  = "vcount"
	attrVDims   = "vdims"
	attrVData   = "vdata"
	attrVChunks = "vchunks" // manifest: start:count,...
)

func skVector(set string, start int) string { return fmt.Sprintf("VEC#%s#%06d", set, start) }
func skVectorManifest(set string) string    { return "VEC#" + set + "#M" }
func fileVectorGSI(bot string) string       { return "BOT#" + bot + "#FVEC" }

// vectorPrefix is the sort-key prefix of a passage set's vector items.
func vectorPrefix(set string) string { return "VEC#" + set + "#" }

// PutVectors stores a passage set's vector chunks and their manifest
// (BatchWriteItem; the manifest last, so a listed chunk exists).
func (s *Store) PutVectors(ctx context.Context, f platform.FileRecord, chunks []platform.VectorChunk) error {
	if len(chunks) == 0 {
		return nil
	}
	items := make([]item, 0, len(chunks))
	var refs []string
	for _, c := range chunks {
		it := key(filePK(f.ID), skVector(c.Set, c.Start))
		it[attrVCount] = num(int64(c.Count))
		it[attrVDims] = num(int64(c.Dims))
		it[attrVData] = &types.AttributeValueMemberB{Value: c.Data}
		items = append(items, it)
		refs = append(refs, fmt.Sprintf("%d:%d", c.Start, c.Count))
	}
	if err := s.batchPut(ctx, items); err != nil {
		return err
	}
	m := key(filePK(f.ID), skVectorManifest(chunks[0].Set))
	m[attrGSI1PK] = str(fileVectorGSI(f.BotID))
	m[attrGSI1SK] = str(f.ID + "#" + chunks[0].Set)
	m[attrFFileID] = str(f.ID)
	m[attrVDims] = num(int64(chunks[0].Dims))
	m[attrVChunks] = str(strings.Join(refs, ","))
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: m})
	return err
}

// VectorSets reads the manifests of a bot's vector chunks (Query of its
// gsi1 partition) until they name limit vectors; more reports others.
func (s *Store) VectorSets(ctx context.Context, botID string, limit int) (out []platform.VectorChunk, more bool, err error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(fileVectorGSI(botID))},
	}
	n := 0
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, false, err
		}
		for _, it := range res.Items {
			set, _, _ := strings.Cut(strings.TrimPrefix(getS(it, attrSK), "VEC#"), "#")
			file, dims := getS(it, attrFFileID), int(getN(it, attrVDims))
			var chunks []platform.VectorChunk
			count := 0
			for ref := range strings.SplitSeq(getS(it, attrVChunks), ",") {
				a, b, _ := strings.Cut(ref, ":")
				start, err1 := strconv.Atoi(a)
				c, err2 := strconv.Atoi(b)
				if err1 != nil || err2 != nil {
					continue
				}
				chunks = append(chunks, platform.VectorChunk{FileID: file, Set: set, Start: start, Count: c, Dims: dims})
				count += c
			}
			if n+count > limit {
				return out, true, nil
			}
			n += count
			out = append(out, chunks...)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, false, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// VectorData reads the data of chunks named by VectorSets (BatchGetItem,
// 100 a call); chunks no longer stored are left out.
func (s *Store) VectorData(ctx context.Context, refs []platform.VectorChunk) ([]platform.VectorChunk, error) {
	keys := make([]item, 0, len(refs))
	byKey := map[[2]string]platform.VectorChunk{}
	for _, r := range refs {
		k := key(filePK(r.FileID), skVector(r.Set, r.Start))
		byKey[[2]string{filePK(r.FileID), skVector(r.Set, r.Start)}] = r
		keys = append(keys, k)
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]platform.VectorChunk, 0, len(items))
	for _, it := range items {
		c, ok := byKey[[2]string{getS(it, attrPK), getS(it, attrSK)}]
		if !ok {
			continue
		}
		if b, ok := it[attrVData].(*types.AttributeValueMemberB); ok {
			c.Data = b.Value
		}
		c.Count, c.Dims = int(getN(it, attrVCount)), int(getN(it, attrVDims))
		out = append(out, c)
	}
	return out, nil
}

// BotVectorBytes is the size of a bot's stored vectors (each a float32
// scale and Dims int8 values): the sum over its manifests (a Query of
// their gsi1 partition, a few hundred bytes per indexed file).
func (s *Store) BotVectorBytes(ctx context.Context, botID string) (int64, error) {
	var total int64
	err := s.eachPage(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(fileVectorGSI(botID))},
		ProjectionExpression:      aws.String("#d, #c"),
		ExpressionAttributeNames:  map[string]string{"#d": attrVDims, "#c": attrVChunks},
	}, func(items []item) error {
		for _, it := range items {
			dims := getN(it, attrVDims)
			for ref := range strings.SplitSeq(getS(it, attrVChunks), ",") {
				_, b, _ := strings.Cut(ref, ":")
				if n, err := strconv.ParseInt(b, 10, 64); err == nil {
					total += n * (4 + dims)
				}
			}
		}
		return nil
	})
	return total, err
}
