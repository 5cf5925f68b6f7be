package dynamo

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Vector items (semantic search, docs/files.md): a passage set's
// embeddings in chunks under the file's partition, so they go with the
// set and the file, and in the bot's gsi1 partition BOT#<bot>#FVEC, which
// a search reads whole (bounded by files.MaxSearchVectors).
const (
	attrVStart = "vstart"
	attrVCount = "vcount"
	attrVDims  = "vdims"
	attrVData  = "vdata"
)

func skVector(set string, start int) string { return fmt.Sprintf("VEC#%s#%06d", set, start) }
func fileVectorGSI(bot string) string       { return "BOT#" + bot + "#FVEC" }

// PutVectors stores a passage set's vector chunks (BatchWriteItem).
func (s *Store) PutVectors(ctx context.Context, f platform.FileRecord, chunks []platform.VectorChunk) error {
	items := make([]item, 0, len(chunks))
	for _, c := range chunks {
		it := key(filePK(f.ID), skVector(c.Set, c.Start))
		it[attrGSI1PK] = str(fileVectorGSI(f.BotID))
		it[attrGSI1SK] = str(fmt.Sprintf("%s#%s#%06d", f.ID, c.Set, c.Start))
		it[attrFFileID] = str(f.ID)
		it[attrVStart] = num(int64(c.Start))
		it[attrVCount] = num(int64(c.Count))
		it[attrVDims] = num(int64(c.Dims))
		it[attrVData] = &types.AttributeValueMemberB{Value: c.Data}
		items = append(items, it)
	}
	return s.batchPut(ctx, items)
}

// BotVectors reads a bot's vector chunks (Query of its gsi1 partition,
// 1 MB a page) until they hold limit vectors.
func (s *Store) BotVectors(ctx context.Context, botID string, limit int) (out []platform.VectorChunk, more bool, err error) {
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
			c := platform.VectorChunk{FileID: getS(it, attrFFileID), Start: int(getN(it, attrVStart)),
				Count: int(getN(it, attrVCount)), Dims: int(getN(it, attrVDims))}
			// sk: VEC#<set>#<start>
			c.Set, _, _ = strings.Cut(strings.TrimPrefix(getS(it, attrSK), "VEC#"), "#")
			if b, ok := it[attrVData].(*types.AttributeValueMemberB); ok {
				c.Data = b.Value
			}
			if n+c.Count > limit {
				return out, true, nil
			}
			n += c.Count
			out = append(out, c)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, false, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// vectorPrefix is the sort-key prefix of a passage set's vector items.
func vectorPrefix(set string) string { return "VEC#" + set + "#" }
