// Package localdynamo is the DynamoDB of the local platform: an in-process
// server for DynamoDB's JSON API (the protocol the AWS SDK speaks) that keeps
// its data on disk, so the production code path (the SDK client) is the one
// that runs locally.
//
// # Storage
//
// Data lives in Pebble (github.com/cockroachdb/pebble, the LSM store
// CockroachDB runs on) in dir/store: one ordered key space in which each
// table has its items, one range per secondary index and one for TTL
// expiries (keys.go). Key attribute values are encoded so that byte order is
// DynamoDB's order, so a Query is a seek and a walk over one partition's
// range: its cost follows the page, not the table. A GetItem is one point
// read (Bloom filters on every level). The block cache is bounded (128 MiB by
// default); everything else stays on disk.
//
// # Writes and durability
//
// A write request is one Pebble batch (the item, its index and TTL entries,
// for a transaction all its items) committed with a synced WAL write before
// the answer: every acknowledged write survives kill -9, and a batch is
// applied whole or not at all, so a crash leaves nothing half done. Pebble's
// commit pipeline lets concurrent writers share fsyncs (group commit).
//
// Read-modify-writes (conditions, update expressions, transactions) hold the
// locks of the items they touch (1024 striped mutexes, taken in order so
// transactions cannot deadlock): writes to different items run in parallel.
// Table definitions are guarded by an RWMutex that item operations hold
// shared and CreateTable, UpdateTable, DeleteTable and UpdateTimeToLive hold
// exclusively.
//
// Reads see committed data through Pebble snapshots (a Query's index
// entries and items come from the same snapshot). Pebble makes a batch
// visible once it is in the memtable, possibly before its fsync finished; a
// read therefore waits for the writes in flight that it may have seen
// (inflight): those begun before it ended whose keys fall on the keys or
// ranges it read, so nothing not yet durable is ever answered, and a read
// does not wait for other items' fsyncs.
//
// The one exception is a lane's (shared/writelane, lane.go): a DeleteItem
// of a lane says when it is visible, before its fsync, and the lane's own
// reads do not wait for its writes in flight; the lane's caller
// (the local dispatcher's worker of one outbox shard) goes on meanwhile.
//
// # Expressions
//
// Condition, filter, update and projection expressions are evaluated by
// minidyn's interpreter (third_party/minidyn), each parsed once per request.
// Key conditions are reduced to a partition value and a sort key range.
// ExpressionAttributeNames and Values are checked as DynamoDB checks them
// (undefined or unused placeholders are refused).
//
// # Fidelity
//
// The behaviour the platform relies on follows DynamoDB: condition
// expressions with ReturnValuesOnConditionCheckFailure, atomic
// TransactWriteItems with CancellationReasons in request order, at most one
// operation per item in a transaction, global and local secondary indexes
// with ALL, KEYS_ONLY and INCLUDE projections, TTL (expired items deleted by
// a background pass every TTLInterval, those expired more than five years
// ago left alone, as DynamoDB does), and the limits: 25 requests per
// BatchWriteItem, 100 keys per BatchGetItem, 100 items per transaction,
// 400 KB per item, 1 MB per Query or Scan page, 38 significant digits per
// number, no empty key values. Legacy parameters (Expected, KeyConditions,
// AttributeUpdates...) are refused with a clear message.
//
// # Capacity units
//
// CountUnits makes the server count the read and write capacity units of
// every request as DynamoDB bills them on demand, per partition key of the
// table and of each index and per operation (units.go); Usage returns
// them. Off by default. A request asking ReturnConsumedCapacity (TOTAL or
// INDEXES) is answered its ConsumedCapacity from the same charge.
//
// # Disk
//
// Pebble compacts in the background; besides, once the bytes overwritten or
// deleted since the last compaction exceed both 64 MiB and half the live
// data, a full compaction runs, so the files stay bounded by the live data.
// While the file system has less than MinFreeBytes free (64 MiB by default),
// writes are refused with InsufficientStorageException (the platform answers
// 507) before they reach Pebble: reads go on, and writes resume by
// themselves when space is freed.
//
// The directory is private: Open makes it 0700 and every file in it 0600,
// whoever created it (the store holds signing secrets and chat content). It
// is used by at most one Server at a time (an exclusive flock on dir/LOCK).
//
// A directory written by the previous version (minidyn in memory behind a
// journal of write requests) is migrated on Open: the journal's requests are
// replayed into the store once, then the journal is removed.
package localdynamo
