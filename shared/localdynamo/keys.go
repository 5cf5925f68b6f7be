package localdynamo

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/truora/minidyn/types"
)

// The store is one ordered key space (Pebble). Every table has a numeric id,
// and its records live under prefixes that sort together:
//
//	'm' name                                   table definition (JSON)
//	'd' id  pk sk                              item (wire JSON)
//	'i' id  index gpk gsk pk sk                index entry -> the projected item
//	'x' id  expiry(8) pk sk                    TTL entry -> item key
//
// Key attribute values are encoded so that byte order is DynamoDB's order
// (strings and binaries by their bytes, numbers by value) and so that each
// encoding is self-delimiting: no full key is a prefix of another, which lets
// a query bound its range by prefixes and resume right after a key.
const (
	prefixMeta  = 'm'
	prefixData  = 'd'
	prefixIndex = 'i'
	prefixTTL   = 'x'
)

// appendKeyValue appends the order-preserving encoding of a key attribute
// value of type typ ("S", "N" or "B").
func appendKeyValue(b []byte, v *types.Item, typ string) ([]byte, error) {
	switch typ {
	case "S":
		if v == nil || v.S == nil {
			return nil, fmt.Errorf("expected type S")
		}
		return appendEscaped(b, []byte(*v.S)), nil
	case "B":
		if v == nil || v.B == nil {
			return nil, fmt.Errorf("expected type B")
		}
		return appendEscaped(b, v.B), nil
	case "N":
		if v == nil || v.N == nil {
			return nil, fmt.Errorf("expected type N")
		}
		d, err := parseNumber(*v.N)
		if err != nil {
			return nil, err
		}
		return append(b, d.key()...), nil
	}
	return nil, fmt.Errorf("unsupported key type %q", typ)
}

// appendEscaped writes bytes with 0x00 escaped as 0x00 0xFF and a 0x00 0x01
// terminator, which keeps byte order and makes the encoding self-delimiting.
func appendEscaped(b, s []byte) []byte {
	for _, c := range s {
		if c == 0 {
			b = append(b, 0, 0xFF)
		} else {
			b = append(b, c)
		}
	}
	return append(b, 0, 1)
}

// decimal is a DynamoDB number: 0.digits x 10^exp, digits without leading or
// trailing zeros (empty for zero).
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// parseNumber validates a DynamoDB number as DynamoDB does (38 significant
// digits, magnitude between 1E-130 and 1E+126).
func parseNumber(s string) (decimal, error) {
	bad := fmt.Errorf("A value provided cannot be converted into a number")
	t := strings.TrimSpace(s)
	var d decimal
	if t == "" {
		return d, bad
	}
	switch t[0] {
	case '-':
		d.neg = true
		t = t[1:]
	case '+':
		t = t[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(t), "e")
	e := 0
	if hasExp {
		if expPart == "" {
			return d, bad
		}
		sign := 1
		switch expPart[0] {
		case '-':
			sign, expPart = -1, expPart[1:]
		case '+':
			expPart = expPart[1:]
		}
		if expPart == "" || len(expPart) > 6 {
			return d, bad
		}
		for _, c := range expPart {
			if c < '0' || c > '9' {
				return d, bad
			}
			e = e*10 + int(c-'0')
		}
		e *= sign
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" {
		return d, bad
	}
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return d, bad
		}
	}
	all := intPart + frac
	pointAt := len(intPart) // digits before the point
	lead := 0
	for lead < len(all) && all[lead] == '0' {
		lead++
	}
	all = all[lead:]
	pointAt -= lead
	all = strings.TrimRight(all, "0")
	if all == "" {
		return decimal{}, nil
	}
	if len(all) > 38 {
		return d, fmt.Errorf("Attempting to store more than 38 significant digits in a Number")
	}
	d.digits = all
	d.exp = pointAt + e
	if d.exp > 126 {
		return d, fmt.Errorf("Number overflow. Attempting to store a number with magnitude larger than supported range")
	}
	if d.exp < -129 {
		return d, fmt.Errorf("Number underflow. Attempting to store a number with magnitude smaller than supported range")
	}
	return d, nil
}

// key is the order-preserving encoding: a class byte (negative < zero <
// positive), the exponent, the digits and a terminator; for negative numbers
// everything after the class byte is inverted so that larger magnitudes sort
// first.
func (d decimal) key() []byte {
	if d.digits == "" {
		return []byte{0x80}
	}
	b := make([]byte, 0, 4+len(d.digits))
	var e [2]byte
	binary.BigEndian.PutUint16(e[:], uint16(d.exp+0x8000))
	if !d.neg {
		b = append(b, 0xC0, e[0], e[1])
		b = append(b, d.digits...)
		return append(b, 0x00)
	}
	b = append(b, 0x40, ^e[0], ^e[1])
	for i := 0; i < len(d.digits); i++ {
		b = append(b, ^d.digits[i])
	}
	return append(b, 0xFF)
}

// prefixEnd returns the smallest key greater than every key with the given
// prefix (nil when there is none).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func tablePrefix(kind byte, id uint32) []byte {
	b := make([]byte, 5, 64)
	b[0] = kind
	binary.BigEndian.PutUint32(b[1:], id)
	return b
}

func metaKey(name string) []byte { return append([]byte{prefixMeta}, name...) }
