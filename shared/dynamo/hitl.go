package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Humans in the loop (shared/hitl, docs/hitl.md): the bot's partition
// HITL#<bot> holds one record per session (S#<conversationId>), listed
// newest first in its workspace's gsi1 list, and the claim of each end
// user's open session (U#<userId>, attribute conv), written in the
// session's transaction and deleted in the one that closes it: startHitl
// twice for one user finds the open session instead of opening another.
// One partition per bot: a deleted bot's sessions go with its other
// records (purgeBotExtras).
const (
	attrConv = "conv"
	// maxHitlList bounds a listing (the inbox reads the newest sessions).
	maxHitlList = 500
)

func hitlPK(bot string) string      { return "HITL#" + bot }
func hitlSK(conv string) string     { return "S#" + conv }
func hitlOpenSK(user string) string { return "U#" + user }
func hitlList(ws string) string     { return "WS#" + ws + "#HITL" }

// StartHitlSession stores a new session with its user's open claim; when
// the user already has an open session, that one is answered instead
// (created false) and nothing is written.
func (s *Store) StartHitlSession(ctx context.Context, h platform.HitlSession) (platform.HitlSession, bool, error) {
	it, err := chatItem(hitlPK(h.BotID), hitlSK(h.ID), h)
	if err != nil {
		return h, false, err
	}
	it[attrGSI1PK], it[attrGSI1SK] = str(hitlList(h.WorkspaceID)), str(timeKey(h.CreatedAt, h.ID))
	claim := key(hitlPK(h.BotID), hitlOpenSK(h.UserID))
	claim[attrConv] = str(h.ID)
	for attempt := 0; attempt < 5; attempt++ {
		if cur, ok, err := s.openHitlSession(ctx, h.BotID, h.UserID); err != nil || ok {
			return cur, false, err
		}
		err = s.txWrite(ctx, []types.TransactWriteItem{putNew(it), putNew(claim)})
		switch failedAt(err) {
		case -1:
			return h, err == nil, err
		case 0:
			return h, false, platform.Errorf(platform.ErrAlreadyExists, "hitl session %q already exists", h.ID)
		}
		// Another start claimed the user first: answer its session.
	}
	return h, false, platform.Errorf(platform.ErrResourceLocked, "the user's hitl session is being started concurrently, retry")
}

// openHitlSession is the user's open session, if the claim names one.
func (s *Store) openHitlSession(ctx context.Context, bot, user string) (platform.HitlSession, bool, error) {
	c, err := s.get(ctx, hitlPK(bot), hitlOpenSK(user))
	if err != nil || c == nil {
		return platform.HitlSession{}, false, err
	}
	h, _, err := s.getHitl(ctx, bot, getS(c, attrConv))
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return h, false, nil
	}
	return h, err == nil && h.Status != platform.HitlClosed, err
}

// GetHitlSession reads a session of the bot.
func (s *Store) GetHitlSession(ctx context.Context, bot, id string) (platform.HitlSession, error) {
	h, _, err := s.getHitl(ctx, bot, id)
	return h, err
}

func (s *Store) getHitl(ctx context.Context, bot, id string) (platform.HitlSession, int64, error) {
	var h platform.HitlSession
	if !platform.HasPrefix(id, platform.PrefixConversation) {
		return h, 0, platform.NotFound("hitl session", id)
	}
	it, err := s.get(ctx, hitlPK(bot), hitlSK(id))
	if err != nil {
		return h, 0, err
	}
	if it == nil {
		return h, 0, platform.NotFound("hitl session", id)
	}
	err = decodeDoc(it, &h)
	return h, getN(it, attrVer), err
}

// UpdateHitlSession applies change, conditional on the version read
// (retried on a concurrent change); a session that becomes closed frees
// its user's claim in the same transaction.
func (s *Store) UpdateHitlSession(ctx context.Context, bot, id string, change func(h *platform.HitlSession) error) (platform.HitlSession, error) {
	var out platform.HitlSession
	err := optimistic(ctx, "hitl session "+id, func() error {
		h, ver, err := s.getHitl(ctx, bot, id)
		if err != nil {
			return err
		}
		was := h.Status
		if err := change(&h); err != nil {
			return err
		}
		upd, err := replaceVersioned(hitlPK(bot), hitlSK(id), h, ver)
		if err != nil {
			return err
		}
		w := []types.TransactWriteItem{upd}
		if was != platform.HitlClosed && h.Status == platform.HitlClosed {
			w = append(w, types.TransactWriteItem{Delete: &types.Delete{
				Key:                       key(hitlPK(bot), hitlOpenSK(h.UserID)),
				ConditionExpression:       aws.String("attribute_not_exists(pk) OR #c = :c"),
				ExpressionAttributeNames:  map[string]string{"#c": attrConv},
				ExpressionAttributeValues: item{":c": str(id)},
			}})
		}
		err = s.txWrite(ctx, w)
		if failedAt(err) == 0 {
			return errRetry
		}
		if err == nil {
			out = h
		}
		return err
	})
	return out, err
}

// ListHitlSessions lists the workspace's sessions, newest first (at most
// limit, itself at most 500).
func (s *Store) ListHitlSessions(ctx context.Context, ws string, limit int) ([]platform.HitlSession, error) {
	if limit <= 0 || limit > maxHitlList {
		limit = maxHitlList
	}
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrGSI1PK},
		ExpressionAttributeValues: item{":pk": str(hitlList(ws))},
		ScanIndexForward:          aws.Bool(false),
	}
	out := []platform.HitlSession{}
	for len(out) < limit {
		in.Limit = aws.Int32(int32(limit - len(out)))
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			var h platform.HitlSession
			if err := decodeDoc(it, &h); err != nil {
				return nil, err
			}
			out = append(out, h)
		}
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	return out, nil
}
