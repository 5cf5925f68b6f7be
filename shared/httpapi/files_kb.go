package httpapi

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/files"
	"github.com/botforge/platform/shared/platform"
)

// Knowledge bases (docs/files.md, "Knowledge bases"): named groups of a
// bot's files. A file belongs to the knowledge base its kbId tag names;
// searchFiles and listFiles with tags.kbId=<id> are scoped to it; deleting
// a knowledge base deletes its files.

const (
	maxKBName     = 255
	maxKBTags     = 50
	maxKBTagName  = 200
	maxKBTagValue = 1000
)

func checkKB(name string, tags map[string]*string) error {
	if strings.TrimSpace(name) == "" || utf8.RuneCountInString(name) > maxKBName {
		return platform.Invalid("invalid body: field %q: 1 to %d characters", "name", maxKBName)
	}
	if len(tags) > maxKBTags {
		return platform.Invalid("invalid body: field %q: at most %d tags", "tags", maxKBTags)
	}
	for k, v := range tags {
		if k == "" || len(k) > maxKBTagName {
			return platform.Invalid("invalid body: field %q: tag names are 1 to %d bytes", "tags", maxKBTagName)
		}
		if v != nil && utf8.RuneCountInString(*v) > maxKBTagValue {
			return platform.Invalid("invalid body: field %q: tag values are at most %d characters", "tags", maxKBTagValue)
		}
	}
	return nil
}

// kbOut is a knowledge base as create and update answer it (the
// reference's answer has no createdAt).
func kbOut(kb platform.KnowledgeBase) map[string]any {
	return map[string]any{"knowledgeBase": map[string]any{"id": kb.ID, "name": kb.Name, "tags": kb.Tags}}
}

func (s *server) createKnowledgeBase(c *call) (any, error) {
	var in struct {
		Name string            `json:"name"`
		Tags map[string]string `json:"tags"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	tags := map[string]*string{}
	for k, v := range in.Tags {
		tags[k] = &v
	}
	if err := checkKB(in.Name, tags); err != nil {
		return nil, err
	}
	kb := platform.KnowledgeBase{ID: platform.NewID(platform.PrefixKnowledgeBase), Name: in.Name,
		CreatedAt: platform.FormatTime(platform.Clock()), Tags: map[string]string{}}
	for k, v := range in.Tags {
		kb.Tags[k] = v
	}
	if err := s.Store.CreateKnowledgeBase(c.ctx, c.bot.ID, kb); err != nil {
		return nil, err
	}
	return kbOut(kb), nil
}

func (s *server) updateKnowledgeBase(c *call) (any, error) {
	var in struct {
		Name string             `json:"name"`
		Tags map[string]*string `json:"tags"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := checkKB(in.Name, in.Tags); err != nil {
		return nil, err
	}
	kb, err := s.Store.UpdateKnowledgeBase(c.ctx, c.bot.ID, c.PathValue("id"), func(kb *platform.KnowledgeBase) error {
		kb.Name = in.Name
		for k, v := range in.Tags {
			if v == nil {
				delete(kb.Tags, k)
			} else {
				kb.Tags[k] = *v
			}
		}
		if len(kb.Tags) > maxKBTags {
			return platform.Invalid("invalid body: field %q: a knowledge base has at most %d tags", "tags", maxKBTags)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return kbOut(kb), nil
}

func (s *server) listKnowledgeBases(c *call) (any, error) {
	filter, err := files.ParseTagFilter(c.URL.Query())
	if err != nil {
		return nil, err
	}
	return listPage(c, "knowledgeBases", listKey("kbs", c.bot.ID, filter.String()), func(p dynamo.Page) ([]platform.KnowledgeBase, map[string]string, error) {
		return s.Store.ListKnowledgeBases(c.ctx, c.bot.ID, func(kb platform.KnowledgeBase) bool { return filter.Match(kb.Tags) }, p)
	})
}

// deleteKnowledgeBase deletes the knowledge base's files (those tagged
// kbId=<id>, as deleteFile does, contents included), then its record. An
// interrupted deletion leaves the record: calling it again finishes it.
func (s *server) deleteKnowledgeBase(c *call) (any, error) {
	id := c.PathValue("id")
	if _, err := s.Store.GetKnowledgeBase(c.ctx, c.bot.ID, id); err != nil {
		return nil, err
	}
	if s.Files == nil {
		return nil, errNoStorage
	}
	bot := c.bot.ID
	scan := dynamo.FileScan{BotID: bot, Order: dynamo.FileOrderCreatedAt, Desc: true, Tag: &[2]string{platform.KnowledgeBaseTag, id},
		Accept: func(r platform.FileRecord) bool { return r.BotID == bot && r.Tags[platform.KnowledgeBaseTag] == id }}
	p := dynamo.Page{Limit: 100}
	for {
		recs, next, err := s.Store.ListFiles(c.ctx, scan, p)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			gone, err := s.Store.DeleteFileFrom(c.ctx, &r, r.ID, func(cur platform.FileRecord) error {
				if cur.BotID != bot || cur.Tags[platform.KnowledgeBaseTag] != id {
					return platform.NotFound("file", r.ID) // retagged since: not the knowledge base's any more
				}
				return nil
			})
			if platform.TypeOf(err) == platform.ErrResourceNotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
			if err := s.Files.Delete(context.WithoutCancel(c.ctx), gone.ObjectKey()); err != nil {
				s.Logger.WarnContext(c.ctx, "object of a deleted file not deleted", "file", gone.ID, "err", err)
			}
		}
		if next == nil {
			break
		}
		p.Start = next
	}
	return nil, s.Store.DeleteKnowledgeBase(c.ctx, bot, id)
}
