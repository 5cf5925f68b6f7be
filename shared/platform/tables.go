package platform

import (
	"context"
	"encoding/json"
)

// Id prefixes of the Tables API.
const (
	PrefixTable    = "table_"
	PrefixTableJob = "tablejob_"
)

// Limits of the Tables API (docs/tables.md).
const (
	// MaxTableRowID is the largest row id: the reference bounds row ids
	// at 2^31-1.
	MaxTableRowID = 2147483647
	// TableRowUnit is the storage a row may use per unit of the table's
	// factor.
	TableRowUnit = 4096
	// MaxRowsPerRequest bounds the rows of one create, update or upsert.
	MaxRowsPerRequest = 1000
)

// Table is a bot's table in the reference's shape. Schema is the
// normalized table schema (a JSON-schema object whose properties are the
// columns), kept as JSON so that what a caller declares (every x-zui field)
// is what it reads back.
type Table struct {
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	Factor           int               `json:"factor"`
	Frozen           bool              `json:"frozen"`
	KeyColumn        string            `json:"keyColumn,omitempty"`
	Schema           json.RawMessage   `json:"schema"`
	Tags             map[string]string `json:"tags"`
	IsComputeEnabled bool              `json:"isComputeEnabled"`
	CreatedAt        string            `json:"createdAt"`
	UpdatedAt        string            `json:"updatedAt"`
}

// TableState is what the platform keeps about a table beside its wire
// shape.
type TableState struct {
	// Columns gives each column (by name) its storage identity. Rows store
	// values under column ids, not names: renaming a column rewrites no
	// row, and a column whose type changes gets a new id, which clears its
	// old values at once.
	Columns map[string]TableColumn `json:"columns"`
	// NextColumn numbers the next new column id.
	NextColumn int `json:"nextColumn"`
	// KeyIndex names the unique index of the key column ("" when the
	// table has no key column).
	KeyIndex string `json:"keyIndex,omitempty"`
	// FillJob is the duplicate job still copying rows into this table:
	// until it completes, row writes are refused.
	FillJob string `json:"fillJob,omitempty"`
	// Index is the state of the table's column index (docs/tables.md,
	// "Indexed filters"): TableIndexNone for a table written before the
	// index existed, TableIndexBuilding while row writes maintain it and
	// the migration fills it, TableIndexReady once finds may use it.
	Index int `json:"index,omitempty"`
	// IndexSince is when row writes began maintaining the index (RFC
	// 3339): the migration fills it only once every write that read the
	// table before then has ended.
	IndexSince string `json:"indexSince,omitempty"`
	// RowShards is how many partitions the table's rows are spread over
	// (by row id modulo RowShards); 0: one partition, the layout of tables
	// created before rows were sharded, which they keep.
	RowShards int `json:"rowShards,omitempty"`
}

// TableRowShards is how many partitions a new table's rows spread over
// (docs/tables.md, "Write heat").
const TableRowShards = 8

// States of a table's column index (TableState.Index).
const (
	TableIndexNone     = 0
	TableIndexBuilding = 1
	TableIndexReady    = 2
)

// TableIndexKey is one entry of a row in a table's column index: the
// column's id and its value, encoded so that string order is value order
// (tables.IndexKeys). The store keys the entry by both and the row's id.
type TableIndexKey struct {
	Col, Key string
}

// TableIndexLookup is how a find asks the store for candidate rows from
// a column's index: the entries of column Col whose key begins with one
// of Prefixes (equality, $in) or, without prefixes, lies between Lo and
// Hi (a range). Candidates are a superset of the matches: the filter is
// evaluated on every row read.
type TableIndexLookup struct {
	Col      string
	Prefixes []string
	Lo, Hi   string
}

// TableColumn is the storage identity of a column.
type TableColumn struct {
	ID string `json:"id"`
	// Gen is the generation of a computed column's definition: a change
	// of it makes every row's value of the column stale.
	Gen int `json:"gen,omitempty"`
}

// TableRow is a row as stored: its system fields and its values by
// column id.
type TableRow struct {
	ID        int64                      `json:"id"`
	CreatedAt string                     `json:"createdAt"`
	UpdatedAt string                     `json:"updatedAt"`
	Values    map[string]json.RawMessage `json:"v"`
	// Computed holds the state of the row's computed columns, by column id.
	Computed map[string]ComputedCell `json:"cp,omitempty"`
}

// ComputedCell is the state of one computed value of a row.
type ComputedCell struct {
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	UpdatedBy string `json:"updatedBy,omitempty"`
	UpdatedAt string `json:"updatedAt,omitempty"`
	// Gen is the column's definition generation the value was written at.
	Gen int `json:"gen,omitempty"`
}

// Statuses of a computed value.
const (
	ComputedStale = "stale"    // waiting to be (re)computed
	ComputedFresh = "computed" // holds a value written after its inputs last changed
)

// TableJob is a background operation on a table, in the reference's shape.
type TableJob struct {
	ID           string  `json:"id"`
	BotID        string  `json:"botId"`
	TableID      string  `json:"tableId"`
	Type         string  `json:"type"`
	Status       string  `json:"status"`
	Progress     float64 `json:"progress"`
	InputFileID  *string `json:"inputFileId"`
	OutputFileID *string `json:"outputFileId"`
	CreatedAt    string  `json:"createdAt"`
	UpdatedAt    string  `json:"updatedAt"`
}

// Table job types and statuses.
const (
	JobExport    = "export"
	JobImport    = "import"
	JobDuplicate = "duplicate_table"

	JobPending    = "pending"
	JobInProgress = "in_progress"
	JobCompleted  = "completed"
	JobFailed     = "failed"
)

// TableFiles is what exportTable and importTable need of the Files API:
// store an export as a file of the bot, and read the content of a file of
// the bot. The Files API provides it; without it the two operations are
// not available.
type TableFiles interface {
	// SaveTableExport stores content as a new file of bot under key and
	// returns the file's id.
	SaveTableExport(ctx context.Context, botID, key, contentType string, content []byte) (fileID string, err error)
	// ReadTableImport returns the content of file fileID of bot (not found:
	// a ResourceNotFound error).
	ReadTableImport(ctx context.Context, botID, fileID string) (content []byte, contentType string, err error)
}
