// Package vrl is an interpreter for the subset of VRL (Vector Remap Language,
// https://vector.dev/docs/reference/vrl/) that Botpress integrations ship as
// webhook scripts: identifier.extractScript, identifier.fallbackHandlerScript
// and configuration.identifier.linkTemplateScript. No maintained VRL evaluator
// exists for Go, so this package implements the parts of the language those
// scripts use, following the VRL reference (grammar, precedence, type-driven
// fallibility checks and runtime semantics).
//
// Supported: programs of expressions separated by newlines or ";" whose last
// value is the result; "#" comments; string literals with escapes and
// "{{ variable }}" templates, raw strings s'...', integers, floats, booleans,
// null, arrays and objects; paths on the event (".", ".a.b", ".\"k\"", ".a[0]",
// ".a[-1]"), on variables and on call, group and container results;
// assignment to variables, event paths and variable paths (intermediate
// objects are created), "_" targets and the "ok, err = expr" form; the
// operators ! * / + - | < <= > >= == != && || ?? with VRL precedence ("&&"
// and "||" share one level, "??" binds loosest); if/else if/else and blocks
// as expressions with block scoping; abort; function calls with positional
// and keyword arguments, "!" to abort on error, and for_each closures.
//
// As in VRL, a fallible expression (a fallible function, or one whose
// arguments may have the wrong type, or operators on values of unknown type)
// must be handled with "!", "??" or "ok, err =": otherwise Compile reports an
// error. Predicates of if must be booleans, unknown functions and undefined
// variables are compile errors.
//
// Values are Go JSON values: nil, bool, string, int64 (VRL integers),
// float64 (VRL floats), []any and map[string]any. Run also accepts int,
// int32, json.Number and the other Go integer types in the event. Results may
// share structure with the event; the event itself is never modified.
//
// Functions: parse_json, parse_query_string, to_string, to_int, to_float,
// to_bool, string, int, float, bool, object, array, is_string, is_null,
// is_object, is_array, is_boolean, is_integer, is_float, is_nullish,
// is_empty, exists, del, get, contains, starts_with, ends_with, upcase,
// downcase, strip_whitespace, split (string patterns), join, length, keys,
// values, push, append, merge, replace (string patterns), encode_json,
// encode_base64, decode_base64, encode_base16, decode_base16,
// encode_percent, decode_percent, hmac, sha1, sha2, md5, assert and
// for_each. Any other name is a compile error naming the function.
//
// Not supported: regex and timestamp literals, metadata paths ("%"), the
// "%" operator, coalescing path segments (".(a|b)"), dynamic index
// expressions (VRL has none either), multi-expression predicates, "|="
// merge assignment, return, break, continue, and the rest of the VRL
// standard library.
//
// Like VRL, this rejects a few scripts found in Botpress integrations:
// "if message.is_echo { ... }" (a predicate that is not known to be a
// boolean), "parts[length(parts) - 1]" (an index that is not an integer
// literal) and a script reading a variable it never assigns.
//
// Programs are bounded: source length (MaxSourceLen), nesting depth
// (MaxDepth), evaluation steps (MaxSteps) and bytes allocated by values the
// program builds (MaxAlloc). There is no I/O, clock or randomness.
package vrl
