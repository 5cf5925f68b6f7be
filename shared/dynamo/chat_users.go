package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/platform"
)

const listUsers = "USERS"

// userDoc is how a user is stored: its wire shape and its integration.
type userDoc struct {
	platform.User
	StoredIntegration string `json:"_integration,omitempty"`
}

type userRecord struct {
	platform.User
	ver int64
}

func userFrom(it item) (userRecord, bool, error) {
	var d userDoc
	if err := decodeDoc(it, &d); err != nil {
		return userRecord{}, false, err
	}
	u := d.User
	u.Integration = d.StoredIntegration
	if u.Tags == nil {
		u.Tags = map[string]string{}
	}
	_, deleting := it[attrDeleting]
	return userRecord{User: u, ver: getN(it, attrVer)}, !deleting, nil
}

// userIndex is a user's entries in the tag indexes, by creation time (gsi1)
// and update time (gsi2).
func userIndex(bot string, u platform.User) []item {
	out := make([]item, 0, len(u.Tags))
	for _, k := range sortedKeys(u.Tags) {
		v := u.Tags[k]
		it := key(userPK(bot, u.ID), skIdx+idxTag(k))
		it[attrValue], it[attrObject] = str(v), str(u.ID)
		gsi := idxGSI(bot, platform.TagsOfUser, idxTag(k))
		it[attrGSI1PK], it[attrGSI1SK] = str(gsi), str(idxKey(v, u.CreatedAt, u.ID))
		it[attrGSI2PK], it[attrGSI2SK] = str(gsi), str(idxKey(v, u.UpdatedAt, u.ID))
		out = append(out, it)
	}
	return out
}

func userWrites(bot string, u platform.User) ([]types.TransactWriteItem, error) {
	it, err := chatItem(userPK(bot, u.ID), skUser, userDoc{User: u, StoredIntegration: u.Integration})
	if err != nil {
		return nil, err
	}
	it[attrGSI1PK], it[attrGSI1SK] = str(botList(bot, listUsers)), str(timeKey(u.CreatedAt, u.ID))
	it[attrGSI2PK], it[attrGSI2SK] = str(botList(bot, listUsers)), str(timeKey(u.UpdatedAt, u.ID))
	// Counted for getBotAnalytics' newUsers (usage_limits.go).
	w := []types.TransactWriteItem{putNew(it), usageAdd(bot, UsageNewUsers, 1)}
	for _, e := range userIndex(bot, u) {
		w = append(w, put(e))
	}
	return w, nil
}

// CreateUser stores a new user with its tag index entries, in one transaction.
func (s *Store) CreateUser(ctx context.Context, bot string, u platform.User) error {
	w, err := userWrites(bot, u)
	if err != nil {
		return err
	}
	err = s.txWrite(ctx, w)
	if failedAt(err) >= 0 {
		return platform.Errorf(platform.ErrAlreadyExists, "user %q already exists", u.ID)
	}
	return err
}

func (s *Store) getUser(ctx context.Context, bot, id string) (userRecord, error) {
	return getLive(ctx, s, "user", platform.PrefixUser, id, userPK(bot, id), skUser, userFrom)
}

// GetUser reads a user of the bot (one GetItem).
func (s *Store) GetUser(ctx context.Context, bot, id string) (platform.User, error) {
	u, err := s.getUser(ctx, bot, id)
	return u.User, err
}

// UserPatch is an updateUser call: nil leaves a field unchanged; an empty
// name or picture removes it; an empty tag value removes the tag.
type UserPatch struct {
	Tags       map[string]string
	Name       *string
	PictureURL *string
}

func (p UserPatch) apply(u platform.User) (platform.User, bool) {
	next := u
	next.Tags = chat.ApplyTags(u.Tags, p.Tags)
	if p.Name != nil {
		next.Name = *p.Name
	}
	if p.PictureURL != nil {
		next.PictureURL = *p.PictureURL
	}
	changed := !chat.SameTags(next.Tags, u.Tags) || next.Name != u.Name || next.PictureURL != u.PictureURL
	return next, changed
}

// UpdateUser applies a patch: the record (conditional on the version read)
// and its tag index entries in one transaction, retried on a concurrent
// change. Nothing is written when nothing changes.
func (s *Store) UpdateUser(ctx context.Context, bot, id string, p UserPatch) (platform.User, error) {
	var out platform.User
	err := optimistic(ctx, "user "+id, func() error {
		rec, err := s.getUser(ctx, bot, id)
		if err != nil {
			return err
		}
		u, changed := p.apply(rec.User)
		if !changed {
			out = rec.User
			return nil
		}
		if err := chat.BodyTags("tags", u.Tags); err != nil {
			return err
		}
		u.UpdatedAt = platform.Now()
		rw, err := versionedUpdate(userPK(bot, id), skUser, id, rec.ver, userDoc{User: u, StoredIntegration: u.Integration}, u.UpdatedAt)
		if err != nil {
			return err
		}
		w := append([]types.TransactWriteItem{rw}, reindexWrites(userPK(bot, id), userIndex(bot, u), nil, rec.Tags, u.Tags)...)
		err = s.txWrite(ctx, w)
		if failedAt(err) >= 0 {
			return errRetry
		}
		out = u
		return err
	})
	return out, err
}

// DeleteUser deletes a user, its tag index entries, states, participations
// (on both sides) and claims, the way DeleteConversation does (deleteOwner):
// mark, read the partition, delete the children, then the record.
func (s *Store) DeleteUser(ctx context.Context, bot, id string) error {
	return s.deleteOwner(ctx, deletionUser, bot, id)
}

// userTwin names the item outside a user's partition that a child in it
// stands for: a participation's participant item.
func userTwin(bot, id string) func(sk, object string) item {
	return func(sk, object string) item {
		if hasPrefix(sk, skPart) {
			return key(convPK(bot, object), skPart+id) // the participant item
		}
		return nil
	}
}

// UserFilter selects and orders ListUsers.
type UserFilter struct {
	BotID          string
	ByUpdatedAt    bool // sort by update time (else creation time)
	Descending     bool
	Tags           map[string]string
	ConversationID string // only the conversation's participants
	// After and Before bound the creation time, or the update time with
	// RangeByUpdatedAt; inclusive, wire format, "" = open.
	RangeByUpdatedAt bool
	After, Before    string
}

func (f UserFilter) accepts(u platform.User) bool {
	for k, v := range f.Tags {
		if u.Tags[k] != v {
			return false
		}
	}
	t := u.CreatedAt
	if f.RangeByUpdatedAt {
		t = u.UpdatedAt
	}
	return (f.After == "" || t >= f.After) && (f.Before == "" || t <= f.Before)
}

// ListUsers lists a bot's users, one page: the participants of a
// conversation (in the order users were created, the conversation's
// partition, strongly consistent), or through the index of a tag, or the
// bot's list of users; the time bounds are in the key condition when they
// apply to the field the list is sorted by.
func (s *Store) ListUsers(ctx context.Context, f UserFilter, p Page) ([]platform.User, map[string]string, error) {
	bot := f.BotID
	sp := span{index: GSI1, desc: f.Descending}
	if f.ByUpdatedAt {
		sp.index = GSI2
	}
	from, to := "", ""
	if f.ByUpdatedAt == f.RangeByUpdatedAt {
		from, to = f.After, f.Before
	}
	entries := true
	switch {
	case f.ConversationID != "":
		sp = span{pk: convPK(bot, f.ConversationID), lo: skPart, hi: skPart + "~", desc: f.Descending}
	case len(f.Tags) > 0:
		k := sortedKeys(f.Tags)[0]
		sp.pk = idxGSI(bot, platform.TagsOfUser, idxTag(k))
		sp.lo, sp.hi = valueSpan(f.Tags[k], from, to)
	default:
		sp.pk = botList(bot, listUsers)
		sp.lo, sp.hi = timeSpan(from, to)
		entries = false
	}
	out, next, err := collect(ctx, s, sp, positionOf(p), int(p.Limit), 0, func(items []item) ([]*platform.User, error) {
		return s.loadUsers(ctx, bot, items, entries, f.accepts)
	})
	return out, startOf(next), err
}

// loadUsers turns a batch of list items (users, or entries pointing at
// users, read in one BatchGetItem) into users.
func (s *Store) loadUsers(ctx context.Context, bot string, items []item, entries bool, ok func(platform.User) bool) ([]*platform.User, error) {
	load := keep(func(it item) (platform.User, bool, error) {
		u, live, err := userFrom(it)
		return u.User, live, err
	}, ok)
	if entries {
		load = viaEntries(ctx, s, func(id string) item { return key(userPK(bot, id), skUser) }, load)
	}
	return load(items)
}

// UserLookup is a getOrCreateUser call: the user of the integration whose
// discriminating tags (Keys) have the values of Tags.
type UserLookup struct {
	BotID       string
	Integration string
	Tags        map[string]string
	Keys        []string
	Name        *string
	PictureURL  *string
}

func (l UserLookup) matches(u platform.User) bool {
	return u.Integration == l.Integration && chat.Matches(u.Tags, l.Tags, l.Keys)
}

// GetOrCreateUser returns the user matching l, creating it when there is
// none (concurrent calls agree on one, see GetOrCreateConversation), and
// applies l's tags, name and picture to a user it finds.
func (s *Store) GetOrCreateUser(ctx context.Context, l UserLookup) (platform.User, bool, error) {
	bot := l.BotID
	hash := claimHash([]string{"user", l.Integration}, l.Tags, l.Keys)
	var (
		out     platform.User
		created bool
	)
	err := optimistic(ctx, "the user", func() error {
		found, stale, err := s.claimed(ctx, bot, "user", hash, claimCheck(func(id string) (platform.User, error) {
			return s.GetUser(ctx, bot, id)
		}, l.matches, &out))
		if err != nil || found {
			return err
		}
		u, ok, err := s.findUser(ctx, l)
		if err != nil {
			return err
		}
		var w []types.TransactWriteItem
		if ok {
			w = []types.TransactWriteItem{liveCheck(userPK(bot, u.ID), skUser)}
		} else {
			u = chat.NewUser(l.Integration, l.Tags, l.Name, l.PictureURL)
			if w, err = userWrites(bot, u); err != nil {
				return err
			}
		}
		w = append(w, claimWrites(bot, "user", hash, stale, userPK(bot, u.ID), u.ID)...)
		if err := s.txWrite(ctx, w); err != nil {
			if failedAt(err) >= 0 {
				return errRetry
			}
			return err
		}
		out, created = u, !ok
		return nil
	})
	if err != nil || created {
		return out, created, err
	}
	patch := UserPatch{Tags: l.Tags, Name: l.Name, PictureURL: l.PictureURL}
	if _, changed := patch.apply(out); changed {
		out, err = s.UpdateUser(ctx, bot, out.ID, patch)
	}
	return out, false, err
}

func (s *Store) findUser(ctx context.Context, l UserLookup) (platform.User, bool, error) {
	sp := span{index: GSI1, desc: true, pk: botList(l.BotID, listUsers)}
	entries := false
	for _, k := range l.Keys {
		if v := l.Tags[k]; v != "" {
			sp.pk = idxGSI(l.BotID, platform.TagsOfUser, idxTag(k))
			sp.lo, sp.hi = valueSpan(v, "", "")
			entries = true
			break
		}
	}
	found, _, err := collect(ctx, s, sp, "", 1, 1<<30, func(items []item) ([]*platform.User, error) {
		return s.loadUsers(ctx, l.BotID, items, entries, l.matches)
	})
	if err != nil || len(found) == 0 {
		return platform.User{}, false, err
	}
	return found[0], true, nil
}

// --- Participants ---

// AddParticipant makes a user a participant of a conversation (idempotent).
// The participant item in the conversation's partition is also the entry of
// the participant index (listConversations by participant); its twin in the
// user's partition lets deleteUser find the user's conversations. Both are
// written with conditions that the conversation and the user exist and are
// not being deleted.
func (s *Store) AddParticipant(ctx context.Context, bot, convID, userID string) (platform.User, error) {
	if !platform.HasPrefix(convID, platform.PrefixConversation) {
		return platform.User{}, platform.NotFound("conversation", convID)
	}
	if !platform.HasPrefix(userID, platform.PrefixUser) {
		return platform.User{}, platform.NotFound("user", userID)
	}
	got, err := s.getMany(ctx, []item{key(convPK(bot, convID), skConv), key(userPK(bot, userID), skUser)})
	if err != nil {
		return platform.User{}, err
	}
	cit, uit := got[keyID(convPK(bot, convID), skConv)], got[keyID(userPK(bot, userID), skUser)]
	if cit == nil {
		return platform.User{}, platform.NotFound("conversation", convID)
	}
	if uit == nil {
		return platform.User{}, platform.NotFound("user", userID)
	}
	c, live, err := convFrom(cit)
	if err != nil || !live {
		return platform.User{}, orNotFound(err, "conversation", convID)
	}
	u, live, err := userFrom(uit)
	if err != nil || !live {
		return platform.User{}, orNotFound(err, "user", userID)
	}
	p := key(convPK(bot, convID), skPart+userID)
	p[attrObject] = str(userID)
	p[attrGSI1PK] = str(idxGSI(bot, platform.TagsOfConversation, idxParticipant))
	p[attrGSI1SK] = str(idxKey(userID, c.CreatedAt, convID))
	twin := key(userPK(bot, userID), skPart+convID)
	twin[attrObject] = str(convID)
	err = s.txWrite(ctx, []types.TransactWriteItem{
		liveCheck(convPK(bot, convID), skConv),
		liveCheck(userPK(bot, userID), skUser),
		put(p), put(twin),
	})
	switch failedAt(err) {
	case 0:
		return platform.User{}, platform.NotFound("conversation", convID)
	case 1:
		return platform.User{}, platform.NotFound("user", userID)
	}
	return u.User, err
}

func orNotFound(err error, kind, id string) error {
	if err != nil {
		return err
	}
	return platform.NotFound(kind, id)
}

// GetParticipant reads a participant: its participant item and user in one
// BatchGetItem.
func (s *Store) GetParticipant(ctx context.Context, bot, convID, userID string) (platform.User, error) {
	notFound := platform.NotFound("participant", userID)
	if !platform.HasPrefix(convID, platform.PrefixConversation) || !platform.HasPrefix(userID, platform.PrefixUser) {
		return platform.User{}, notFound
	}
	pk, uk := key(convPK(bot, convID), skPart+userID), key(userPK(bot, userID), skUser)
	got, err := s.getMany(ctx, []item{pk, uk})
	if err != nil {
		return platform.User{}, err
	}
	if got[keyID(convPK(bot, convID), skPart+userID)] == nil {
		return platform.User{}, notFound
	}
	uit := got[keyID(userPK(bot, userID), skUser)]
	if uit == nil {
		return platform.User{}, notFound
	}
	u, live, err := userFrom(uit)
	if err != nil || !live {
		return platform.User{}, orNotFound(err, "participant", userID)
	}
	return u.User, nil
}

// RemoveParticipant removes a user from a conversation's participants.
func (s *Store) RemoveParticipant(ctx context.Context, bot, convID, userID string) error {
	notFound := platform.NotFound("participant", userID)
	if !platform.HasPrefix(convID, platform.PrefixConversation) || !platform.HasPrefix(userID, platform.PrefixUser) {
		return notFound
	}
	err := s.txWrite(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{Key: key(convPK(bot, convID), skPart+userID), ConditionExpression: aws.String("attribute_exists(pk)")}},
		del(userPK(bot, userID), skPart+convID),
	})
	if failedAt(err) >= 0 {
		return notFound
	}
	return err
}
