package dynamo

import (
	"context"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// ListTagValues lists the distinct values a tag has on a bot's users,
// conversations or messages, in value order, one page. It walks the tag's
// index (one entry per record, sorted by value then time) and, after each
// value, jumps past that value's other entries with a new key condition, so
// a page costs about one Query per value whatever the number of records.
// Values exist as long as some record carries them: nothing goes stale.
func (s *Store) ListTagValues(ctx context.Context, bot string, typ platform.TagType, tag string, p Page) ([]string, map[string]string, error) {
	size := int(p.Limit)
	sp := span{index: GSI1, pk: idxGSI(bot, typ, idxTag(tag))}
	values := make([]string, 0, size)
	var encs []string
	lo := positionOf(p)
	for len(values) <= size {
		sp.lo = lo
		items, more, err := s.read(ctx, sp, "", min(2*(size+1-len(values)), maxBatch))
		if err != nil {
			return nil, nil, err
		}
		last := ""
		for _, it := range items {
			enc, _, _ := strings.Cut(getS(it, attrGSI1SK), "#")
			if enc == last {
				continue
			}
			last = enc
			values, encs = append(values, getS(it, attrValue)), append(encs, enc)
			if len(values) > size {
				break
			}
		}
		if len(items) == 0 || (!more && len(values) <= size) {
			return values, nil, nil
		}
		// '$' sorts right after the '#' that ends a value's prefix.
		lo = last + "$"
	}
	return values[:size], startOf(encs[size-1] + "$"), nil
}
