package appliance

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The config file is checked against Config's shape before it is
// decoded, so that an error names the key as the operator wrote it
// ("measurement.wait", line 6) rather than yaml's Go type names, and
// every wrong key is reported at once: `kernelbox config check` and a
// failed start both print the whole list.

// LoadConfigFile reads a YAML config file over c. Unknown keys are errors
// (a misspelt limit must not silently keep its default), as are values
// of the wrong kind; each names its key and line.
func (c *Config) LoadConfigFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return c.loadConfig(path, data)
}

func (c *Config) loadConfig(path string, data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config %s: %w: %s", path, ErrConfig, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 { // an empty file, or only comments: no change
		return nil
	}
	if errs := checkNode(doc.Content[0], reflect.TypeOf(*c), ""); len(errs) > 0 {
		return fmt.Errorf("config %s:\n%w", path, errors.Join(errs...))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s: %w: %w", path, ErrConfig, err)
	}
	return nil
}

var (
	textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
	durationType    = reflect.TypeOf(time.Duration(0))
)

// checkNode checks n against a value of type t at key path, and returns
// an error per wrong key or value.
func checkNode(n *yaml.Node, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Tag == "!!null" {
		return nil // "key:" with no value leaves the default
	}
	leaf := reflect.PointerTo(t).Implements(textUnmarshaler) || t == durationType
	switch {
	case !leaf && t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return []error{nodeError(path, n, "want a mapping of keys (like `key: value` on the lines below), got %s", what(n))}
		}
		return checkStruct(n, t, path)
	case !leaf && t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return []error{nodeError(path, n, "want a mapping, got %s", what(n))}
		}
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			errs = append(errs, checkNode(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))...)
		}
		return errs
	case !leaf && t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		if n.Kind != yaml.SequenceNode {
			return []error{nodeError(path, n, "want a list (lines starting with `- `), got %s", what(n))}
		}
		var errs []error
		for i, item := range n.Content {
			errs = append(errs, checkNode(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	}
	v := reflect.New(t)
	if err := n.Decode(v.Interface()); err != nil {
		return []error{nodeError(path, n, "%s", valueError(t, n, err))}
	}
	return nil
}

func checkStruct(n *yaml.Node, t reflect.Type, path string) []error {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if name := yamlName(f); name != "" {
			fields[name] = f.Type
		}
	}
	var errs []error
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := join(path, k.Value)
		ft, ok := fields[k.Value]
		switch {
		case !ok:
			errs = append(errs, nodeError(key, k, "unknown key%s", suggest(k.Value, fields)))
		case seen[k.Value]:
			errs = append(errs, nodeError(key, k, "given twice"))
		default:
			errs = append(errs, checkNode(val, ft, key)...)
		}
		seen[k.Value] = true
	}
	return errs
}

// yamlName is a field's key in the file, "" for fields no file sets.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func nodeError(key string, n *yaml.Node, format string, args ...any) error {
	if key == "" {
		key = "(the file)"
	}
	return &ConfigError{Field: key, Msg: fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}
}

// what names a node's kind for an error.
func what(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

// valueError says what a key wants, in the file's words.
func valueError(t reflect.Type, n *yaml.Node, err error) string {
	var want string
	switch {
	case t == durationType:
		want = "a duration like 30s, 2m or 1h30m"
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		// The type's own message says what it wants (a size, a clock).
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			msg := te.Errors[0]
			if _, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(msg, "line ") {
				msg = rest
			}
			return msg
		}
		return err.Error()
	case t.Kind() == reflect.Bool:
		want = "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		want = "a whole number"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		want = "a number"
	case t.Kind() == reflect.String:
		want = "a string"
	case t.Kind() == reflect.Slice:
		want = "a list"
	case t.Kind() == reflect.Map:
		want = "a mapping"
	default:
		return err.Error()
	}
	return fmt.Sprintf("want %s, got %s", want, what(n))
}

// suggest names the known key closest to a misspelt one.
func suggest(key string, fields map[string]reflect.Type) string {
	best, bestD := "", 3 // at most two edits away
	for name := range fields {
		if d := editDistance(key, name); d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev = cur
	}
	return prev[len(b)]
}

// ConfigKeys lists every key a config file may set, as dotted paths; a
// map of sections shows its key as <name> (measurement.ceilings.<name>.bytes_per_s).
// docs/configuration.md documents each (TestConfig_Documented).
func ConfigKeys() []string {
	var keys []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := yamlName(f)
			if name == "" {
				continue
			}
			key := join(path, name)
			keys = append(keys, key)
			ft := f.Type
			switch {
			case reflect.PointerTo(ft).Implements(textUnmarshaler) || ft == durationType:
			case ft.Kind() == reflect.Struct:
				walk(ft, key)
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct && !reflect.PointerTo(ft.Elem()).Implements(textUnmarshaler):
				walk(ft.Elem(), key+".<name>")
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), key+"[]")
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	sort.Strings(keys)
	return slices.Compact(keys)
}
