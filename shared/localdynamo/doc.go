// Package localdynamo is the DynamoDB of the "local platform" mode: an
// in-process server for DynamoDB's JSON API (the protocol the AWS SDK speaks)
// that keeps its data across restarts.
//
// The query engine is github.com/truora/minidyn, which holds every table in
// memory and forgets everything when the process exits. That is fine for
// unit tests but not for a local platform, where a developer expects the data
// they created yesterday to be there today, also after a crash or a kill -9.
//
// # Why a journal
//
// Rather than snapshotting minidyn's internal state (which it does not
// expose), Server keeps a write-ahead journal of the requests that changed
// it. minidyn is deterministic: fed the same sequence of requests it reaches
// the same state. So every mutating request that minidyn accepted is appended
// to dir/journal and fsynced before the client sees the response, and Open
// rebuilds the state by replaying the journal into a fresh minidyn. A write the
// client saw succeed is therefore on disk; a write whose fsync had not
// finished when the process died was never acknowledged, and the torn record
// it may leave at the end of the journal is cut away on the next Open.
//
// Concurrent writers share fsyncs (group commit): a request applies its
// change and appends its record under the server's lock, releases the lock,
// and then waits until some fsync covers its record; whichever waiter finds
// no fsync in flight writes and syncs everything appended so far on behalf of
// all of them.
//
// Reads never answer from state that is not yet durable: a read waits, like a
// write, until the journal is synced up to the point it observed.
//
// # Journal format
//
// The file starts with the line "localdynamo journal v1\n", followed by
// records:
//
//	uint32 little-endian  payload length
//	uint32 little-endian  CRC-32 (Castagnoli) of the payload
//	payload:              flag byte, op-name length byte, op name, request body
//
// The flag is 0 for a request minidyn answered with 200, and 1 for a failed
// request that may nevertheless have changed minidyn's state (minidyn is not
// atomic on every error path: a PutItem whose secondary-index key has the
// wrong type stores the item and then fails); a flag-1 record is replayed
// with its result ignored, which reproduces the same partial change. Failures
// known to leave no trace are not journaled: conditional check failures,
// cancelled transactions, missing tables, failed CreateTable and DeleteTable,
// and requests rejected by this package's own checks (invalid JSON, bad
// BatchWriteItem or TimeToLive requests).
//
// A damaged record with no valid record after it is a torn tail and is
// truncated away by Open. A damaged record followed by valid ones is
// corruption and makes Open fail with ErrCorruptJournal.
//
// When Open finds a large journal (more than 64 MiB or 100,000 records) that
// is mostly overwritten history, it rewrites it as the minimal sequence of
// requests that recreates the current state (table definitions, TTL settings
// and one PutItem per item), atomically replacing the old file. It first
// replays the compacted journal into a second minidyn and keeps the old
// journal if that does not reproduce every table's items and TTL setting
// (minidyn cannot read back empty lists and maps, for one). Secondary indexes
// rebuilt this way contain every item, also items written before an
// UpdateTable added the index, which minidyn itself does not backfill.
//
// # Beyond minidyn
//
// Server answers a few operations minidyn lacks and patches some of its
// answers so that ordinary SDK code works:
//   - ListTables, UpdateTimeToLive and DescribeTimeToLive are implemented here
//     (TTL settings are remembered and journaled; expired items are not
//     deleted).
//   - Table descriptions get TableStatus, AttributeDefinitions,
//     BillingModeSummary and TableArn, which minidyn leaves empty (code that
//     waits for TableStatus ACTIVE would otherwise wait forever).
//   - PutItem answers with no attributes, or the old item when ReturnValues
//     is ALL_OLD; minidyn always echoes the new item.
//   - BatchWriteItem rejects duplicate keys and missing or mistyped primary
//     keys up front, as DynamoDB does, and applies tables in name order so
//     that replay is deterministic (minidyn would use map order).
//   - A panic inside minidyn (e.g. Query on an index that does not exist)
//     becomes a 500 InternalServerError instead of wedging the server.
//   - Unknown operations get DynamoDB's UnknownOperationException.
//
// A directory is used by at most one Server at a time: Open takes an
// exclusive flock on dir/LOCK.
package localdynamo
