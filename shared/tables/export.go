package tables

import (
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// Import bounds.
const (
	MaxImportBytes = 64 << 20 // uncompressed content of one import
	MaxImportRows  = 100000
)

// Exporter writes a table's rows as CSV (data only) or JSON (schema and
// rows), optionally gzipped.
type Exporter struct {
	s      *Schema
	format string
	buf    bytes.Buffer
	csv    *csv.Writer
	rows   int
	table  platform.Table
}

// NewExporter starts an export of table in format "csv" or "json".
func NewExporter(t platform.Table, s *Schema, format string) *Exporter {
	e := &Exporter{s: s, format: format, table: t}
	if format == "csv" {
		e.csv = csv.NewWriter(&e.buf)
		header := append([]string{"id", "createdAt", "updatedAt"}, s.ColumnsByIndex()...)
		_ = e.csv.Write(header)
	} else {
		e.buf.WriteString(`{"table":`)
		meta, _ := json.Marshal(map[string]any{"name": t.Name, "factor": t.Factor, "keyColumn": t.KeyColumn, "tags": t.Tags, "isComputeEnabled": t.IsComputeEnabled})
		e.buf.Write(meta)
		e.buf.WriteString(`,"schema":`)
		e.buf.Write(t.Schema)
		e.buf.WriteString(`,"rows":[`)
	}
	return e
}

// Add writes one row.
func (e *Exporter) Add(r *platform.TableRow) {
	if e.format == "csv" {
		rec := []string{strconv.FormatInt(r.ID, 10), r.CreatedAt, r.UpdatedAt}
		for _, name := range e.s.ColumnsByIndex() {
			raw := r.Values[e.s.byName[name].ID]
			switch {
			case len(raw) == 0 || string(raw) == "null":
				rec = append(rec, "")
			case raw[0] == '"':
				var s string
				_ = json.Unmarshal(raw, &s)
				rec = append(rec, s)
			default:
				rec = append(rec, string(raw))
			}
		}
		_ = e.csv.Write(rec)
	} else {
		if e.rows > 0 {
			e.buf.WriteByte(',')
		}
		b, _ := json.Marshal(e.s.Wire(*r))
		e.buf.Write(b)
	}
	e.rows++
}

// Finish returns the content, its content type and file extension.
func (e *Exporter) Finish(compress bool) ([]byte, string, string) {
	ctype, ext := "application/json", "json"
	if e.format == "csv" {
		e.csv.Flush()
		ctype, ext = "text/csv", "csv"
	} else {
		e.buf.WriteString("]}")
	}
	if !compress {
		return e.buf.Bytes(), ctype, ext
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(e.buf.Bytes())
	_ = w.Close()
	return gz.Bytes(), "application/gzip", ext + ".gz"
}

// ParseImport reads the rows of an import file: CSV with a header line
// (an export of the table), or JSON (an export, {"rows": [...]}, or an
// array of row objects), gzipped or not. The rows are returned as given,
// to be validated like created rows; system fields are dropped.
func ParseImport(content []byte, s *Schema) ([]map[string]json.RawMessage, error) {
	if len(content) >= 2 && content[0] == 0x1f && content[1] == 0x8b {
		r, err := gzip.NewReader(bytes.NewReader(content))
		if err != nil {
			return nil, platform.Invalid("invalid import file: bad gzip data: %v", err)
		}
		content, err = io.ReadAll(io.LimitReader(r, MaxImportBytes+1))
		if err != nil {
			return nil, platform.Invalid("invalid import file: bad gzip data: %v", err)
		}
	}
	if len(content) > MaxImportBytes {
		return nil, platform.Errorf(platform.ErrPayloadTooLarge, "import file exceeds %d bytes", MaxImportBytes)
	}
	trimmed := bytes.TrimSpace(content)
	var rows []map[string]json.RawMessage
	var err error
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		rows, err = parseJSONImport(trimmed)
	} else {
		rows, err = parseCSVImport(trimmed, s)
	}
	if err != nil {
		return nil, err
	}
	if len(rows) > MaxImportRows {
		return nil, platform.Invalid("invalid import file: at most %d rows", MaxImportRows)
	}
	for _, r := range rows {
		for k := range r {
			if systemColumns[k] {
				delete(r, k)
			}
		}
	}
	return rows, nil
}

func parseJSONImport(b []byte) ([]map[string]json.RawMessage, error) {
	var rows []map[string]json.RawMessage
	if b[0] == '[' {
		if err := json.Unmarshal(b, &rows); err != nil {
			return nil, platform.Invalid("invalid import file: expected an array of row objects: %v", err)
		}
		return rows, nil
	}
	var doc struct {
		Rows []map[string]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, platform.Invalid("invalid import file: expected {\"rows\": [...]}: %v", err)
	}
	return doc.Rows, nil
}

func parseCSVImport(b []byte, s *Schema) ([]map[string]json.RawMessage, error) {
	r := csv.NewReader(bytes.NewReader(b))
	header, err := r.Read()
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, platform.Invalid("invalid import file: bad CSV header: %v", err)
	}
	var rows []map[string]json.RawMessage
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, platform.Invalid("invalid import file: CSV: %v", err)
		}
		row := map[string]json.RawMessage{}
		for i, name := range header {
			if i >= len(rec) || rec[i] == "" || systemColumns[name] {
				continue
			}
			v, err := csvValue(s.byName[name], rec[i])
			if err != nil {
				return nil, platform.Invalid("invalid import file: line %d, column %q: %v", line, name, err)
			}
			row[name] = v
		}
		rows = append(rows, row)
	}
}

// csvValue turns a CSV field into the JSON value of its column.
func csvValue(c *Column, field string) (json.RawMessage, error) {
	if c == nil || c.Type == TypeString {
		return encode(field), nil
	}
	switch c.Type {
	case TypeNumber:
		f, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", field)
		}
		return encode(f), nil
	case TypeBoolean:
		b, err := strconv.ParseBool(strings.TrimSpace(field))
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", field)
		}
		return encode(b), nil
	}
	if !json.Valid([]byte(field)) {
		return nil, fmt.Errorf("expected JSON for a column of type %s", c.Type)
	}
	return json.RawMessage(field), nil
}
