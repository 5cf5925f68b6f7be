package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Knowledge bases: one record (KB#<bot>#<id>, "KB"), listed in the bot's
// gsi1 list KBS by creation time. Files are tied to one by their kbId tag
// (platform.KnowledgeBaseTag), read through the files' tag index.
const (
	listKBs = "KBS"
	skKB    = "KB"
)

func kbPK(bot, id string) string { return "KB#" + bot + "#" + id }

// CreateKnowledgeBase stores a new knowledge base.
func (s *Store) CreateKnowledgeBase(ctx context.Context, bot string, kb platform.KnowledgeBase) error {
	it, err := chatItem(kbPK(bot, kb.ID), skKB, kb)
	if err != nil {
		return err
	}
	it[attrGSI1PK], it[attrGSI1SK] = str(botList(bot, listKBs)), str(timeKey(kb.CreatedAt, kb.ID))
	return s.txWrite(ctx, []types.TransactWriteItem{putNew(it)})
}

func (s *Store) getKB(ctx context.Context, bot, id string) (platform.KnowledgeBase, int64, error) {
	var kb platform.KnowledgeBase
	if !platform.HasPrefix(id, platform.PrefixKnowledgeBase) {
		return kb, 0, platform.NotFound("knowledge base", id)
	}
	it, err := s.get(ctx, kbPK(bot, id), skKB)
	if err != nil {
		return kb, 0, err
	}
	if it == nil {
		return kb, 0, platform.NotFound("knowledge base", id)
	}
	err = decodeDoc(it, &kb)
	return kb, getN(it, attrVer), err
}

// GetKnowledgeBase reads a knowledge base of the bot.
func (s *Store) GetKnowledgeBase(ctx context.Context, bot, id string) (platform.KnowledgeBase, error) {
	kb, _, err := s.getKB(ctx, bot, id)
	return kb, err
}

// UpdateKnowledgeBase applies change, conditional on the version read
// (retried on a concurrent change).
func (s *Store) UpdateKnowledgeBase(ctx context.Context, bot, id string, change func(*platform.KnowledgeBase) error) (platform.KnowledgeBase, error) {
	var out platform.KnowledgeBase
	err := optimistic(ctx, "knowledge base "+id, func() error {
		kb, ver, err := s.getKB(ctx, bot, id)
		if err != nil {
			return err
		}
		if err := change(&kb); err != nil {
			return err
		}
		upd, err := replaceVersioned(kbPK(bot, id), skKB, kb, ver)
		if err != nil {
			return err
		}
		err = s.txWrite(ctx, []types.TransactWriteItem{upd})
		if failedAt(err) == 0 {
			return errRetry
		}
		out = kb
		return err
	})
	return out, err
}

// DeleteKnowledgeBase deletes the record of a knowledge base (its files
// are deleted before, by the caller).
func (s *Store) DeleteKnowledgeBase(ctx context.Context, bot, id string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: key(kbPK(bot, id), skKB)})
	return err
}

// ListKnowledgeBases lists the bot's knowledge bases, most recent first.
func (s *Store) ListKnowledgeBases(ctx context.Context, bot string, accept func(platform.KnowledgeBase) bool, p Page) ([]platform.KnowledgeBase, map[string]string, error) {
	sp := span{index: GSI1, pk: botList(bot, listKBs), desc: true}
	decode := func(it item) (platform.KnowledgeBase, bool, error) {
		var kb platform.KnowledgeBase
		err := decodeDoc(it, &kb)
		return kb, err == nil, err
	}
	out, next, err := collect(ctx, s, sp, positionOf(p), int(p.Limit), 0, keep(decode, accept))
	return out, startOf(next), err
}

// purgeBotKBs deletes a deleted bot's knowledge bases (its files go with
// the bot's files).
func (s *Store) purgeBotKBs(ctx context.Context, bot string) error {
	return s.purgeIndex(ctx, GSI1, botList(bot, listKBs))
}
