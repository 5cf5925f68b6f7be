package dynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// A state lives in the partition of what it is attached to (conversation,
// user, workflow) so that deleting it deletes its states; a bot's and an
// integration's states have partitions of their own.
func statePK(k platform.StateKey) string {
	switch k.Type {
	case platform.StateConversation:
		return convPK(k.BotID, k.OwnerID)
	case platform.StateUser:
		return userPK(k.BotID, k.OwnerID)
	case platform.StateWorkflow:
		return workflowPK(k.BotID, k.OwnerID)
	case platform.StateIntegration:
		return "INTSTATE#" + k.BotID + "#" + k.OwnerID
	}
	return "BOTSTATE#" + k.BotID
}

// stateOwner is the item that must exist for a state to be read or
// written: the conversation, user, bot or workflow (an integration's
// installation is checked by the caller, from the bot record).
func stateOwner(k platform.StateKey) (item, types.TransactWriteItem, bool) {
	switch k.Type {
	case platform.StateConversation:
		return key(convPK(k.BotID, k.OwnerID), skConv), liveCheck(convPK(k.BotID, k.OwnerID), skConv), true
	case platform.StateUser:
		return key(userPK(k.BotID, k.OwnerID), skUser), liveCheck(userPK(k.BotID, k.OwnerID), skUser), true
	case platform.StateWorkflow:
		return key(workflowPK(k.BotID, k.OwnerID), skWorkflow), mustExist(workflowPK(k.BotID, k.OwnerID), skWorkflow), true
	case platform.StateBot:
		return key(botPK(k.BotID), skBot), mustExist(botPK(k.BotID), skBot), true
	}
	return nil, types.TransactWriteItem{}, false
}

func ownerKind(t platform.StateType) string { return string(t) }

// stateFrom decodes a state; an expired one is absent (DynamoDB's TTL
// deletes it some time later).
func stateFrom(it item) (*platform.State, int64, error) {
	var st platform.State
	if err := decodeDoc(it, &st); err != nil {
		return nil, 0, err
	}
	ver := getN(it, attrVer)
	if st.ExpiresAt != "" && st.ExpiresAt <= platform.Now() {
		return nil, ver, nil
	}
	return &st, ver, nil
}

func ownerLive(it item) bool {
	if it == nil {
		return false
	}
	_, deleting := it[attrDeleting]
	return !deleting
}

// GetState reads a state and what it is attached to, in one BatchGetItem
// (one GetItem for an integration's state).
func (s *Store) GetState(ctx context.Context, k platform.StateKey) (platform.State, error) {
	notFound := platform.NotFound("state", k.Name)
	sk := key(statePK(k), skState+k.Name)
	ok, _, hasOwner := stateOwner(k)
	keys := []item{sk}
	if hasOwner {
		keys = append(keys, ok)
	}
	got, err := s.getMany(ctx, keys)
	if err != nil {
		return platform.State{}, err
	}
	if hasOwner && !ownerLive(got[keyID(getS(ok, attrPK), getS(ok, attrSK))]) {
		return platform.State{}, platform.NotFound(ownerKind(k.Type), k.OwnerID)
	}
	it := got[keyID(statePK(k), skState+k.Name)]
	if it == nil {
		return platform.State{}, notFound
	}
	st, _, err := stateFrom(it)
	if err != nil {
		return platform.State{}, err
	}
	if st == nil {
		return platform.State{}, notFound
	}
	return *st, nil
}

// StateChange computes a state's next value from its current one (nil when
// it does not exist or has expired). It returns the state to store, nil to
// delete it, or old itself to leave it unchanged.
type StateChange func(old *platform.State) (*platform.State, error)

// WriteState applies change to a state: read, change, then a write
// conditional on the version read (together with the condition that what
// the state is attached to exists), retried on a concurrent change, so
// parallel patches all land. It returns the state as written (nil when
// deleted).
func (s *Store) WriteState(ctx context.Context, k platform.StateKey, change StateChange) (*platform.State, error) {
	pk, sk := statePK(k), skState+k.Name
	var out *platform.State
	err := optimistic(ctx, "state "+k.Name, func() error {
		it, err := s.get(ctx, pk, sk)
		if err != nil {
			return err
		}
		var (
			old    *platform.State
			ver    int64
			exists = it != nil
		)
		if exists {
			if old, ver, err = stateFrom(it); err != nil {
				return err
			}
		}
		next, err := change(old)
		if err != nil {
			return err
		}
		if next != nil && next == old {
			out = old
			return nil
		}
		cond, names, vals := "attribute_not_exists(pk)", map[string]string(nil), item(nil)
		if exists {
			cond, names, vals = "#ver = :ver", map[string]string{"#ver": attrVer}, item{":ver": num(ver)}
		}
		var w types.TransactWriteItem
		if next == nil {
			if !exists {
				out = nil
				return nil
			}
			w = types.TransactWriteItem{Delete: &types.Delete{Key: key(pk, sk), ConditionExpression: aws.String(cond),
				ExpressionAttributeNames: names, ExpressionAttributeValues: vals}}
		} else {
			st, err := chatItem(pk, sk, next)
			if err != nil {
				return err
			}
			st[attrVer] = num(ver + 1)
			if next.ExpiresAt != "" {
				t, _ := time.Parse(platform.TimeFormat, next.ExpiresAt)
				st[attrTTL] = num(t.Add(999 * time.Millisecond).Unix())
			}
			w = types.TransactWriteItem{Put: &types.Put{Item: st, ConditionExpression: aws.String(cond),
				ExpressionAttributeNames: names, ExpressionAttributeValues: vals}}
		}
		// A state with an expiry: when it runs out, the runtime checks it
		// was not renewed and tells the bot (state_expired).
		var expiry []types.TransactWriteItem
		if next != nil && next.ExpiresAt != "" {
			d := newDelivery(platform.DeliverStateExpiry, k.BotID, "", next.ExpiresAt)
			kk := k
			d.State, d.ExpiresAt = &kk, next.ExpiresAt
			put, err := outboxPut(d)
			if err != nil {
				return err
			}
			expiry = append(expiry, put)
		}
		if _, check, ok := stateOwner(k); ok {
			err = s.txWrite(ctx, append([]types.TransactWriteItem{w, check}, expiry...))
			switch failedAt(err) {
			case 0:
				return errRetry
			case 1:
				return platform.NotFound(ownerKind(k.Type), k.OwnerID)
			}
		} else if len(expiry) > 0 {
			err = s.txWrite(ctx, append([]types.TransactWriteItem{w}, expiry...))
			if failedAt(err) == 0 {
				return errRetry
			}
		} else {
			err = s.writeOne(ctx, w)
			if isConditionFailed(err) {
				return errRetry
			}
		}
		if err == nil && len(expiry) > 0 {
			s.notifyOutbox()
		}
		out = next
		return err
	})
	return out, err
}

// writeOne runs a single conditional Put or Delete outside a transaction.
func (s *Store) writeOne(ctx context.Context, w types.TransactWriteItem) error {
	if w.Put != nil {
		_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: w.Put.Item,
			ConditionExpression: w.Put.ConditionExpression, ExpressionAttributeNames: w.Put.ExpressionAttributeNames,
			ExpressionAttributeValues: w.Put.ExpressionAttributeValues})
		if err == nil {
			s.noteQueued([]types.TransactWriteItem{w})
		}
		return err
	}
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: w.Delete.Key,
		ConditionExpression: w.Delete.ConditionExpression, ExpressionAttributeNames: w.Delete.ExpressionAttributeNames,
		ExpressionAttributeValues: w.Delete.ExpressionAttributeValues})
	return err
}

// ExpiredState reads a state that has run out: ok only when it exists and
// its expiry is exactly expiresAt (it was not renewed since) and past.
func (s *Store) ExpiredState(ctx context.Context, k platform.StateKey, expiresAt string) (platform.State, bool, error) {
	it, err := s.get(ctx, statePK(k), skState+k.Name)
	if err != nil || it == nil {
		return platform.State{}, false, err
	}
	var st platform.State
	if err := decodeDoc(it, &st); err != nil {
		return platform.State{}, false, err
	}
	return st, st.ExpiresAt == expiresAt && st.ExpiresAt <= platform.Now(), nil
}
