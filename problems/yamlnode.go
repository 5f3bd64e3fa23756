package problems

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The loaders walk yaml.Node trees instead of decoding into structs: that
// keeps the order of case keys (the cases file is positional for some
// harnesses), gives every error a line number, and lets unknown fields become
// warnings, since KernelBot problems may carry fields we do not know.

func parseYAMLDoc(c *collector, data []byte) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		c.add(0, "", "not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return nil
	}
	if len(doc.Content) == 0 {
		c.add(0, "", "file is empty")
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		c.add(root.Line, "", "top level must be a mapping of field: value, got %s", kindName(root))
		return nil
	}
	return root
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("the scalar %q", n.Value)
	}
	return "a document"
}

// pairs returns a mapping's key/value nodes in file order, reporting
// duplicate keys, which YAML allows but which would silently drop a field.
func pairs(c *collector, field string, n *yaml.Node) [][2]*yaml.Node {
	if n.Kind != yaml.MappingNode {
		c.add(n.Line, field, "must be a mapping, got %s", kindName(n))
		return nil
	}
	seen := map[string]bool{}
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			c.add(k.Line, join(field, k.Value), "appears twice")
			continue
		}
		seen[k.Value] = true
		out = append(out, [2]*yaml.Node{k, v})
	}
	return out
}

func join(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func scalarString(c *collector, field string, n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		c.add(n.Line, field, "must be a string, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

func scalarInt(c *collector, field string, n *yaml.Node) (int64, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		v, err := strconv.ParseInt(n.Value, 0, 64)
		if err == nil {
			return v, true
		}
	}
	c.add(n.Line, field, "must be an integer, got %s", kindName(n))
	return 0, false
}

func scalarBool(c *collector, field string, n *yaml.Node) (bool, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		var b bool
		if err := n.Decode(&b); err == nil {
			return b, true
		}
	}
	c.add(n.Line, field, "must be true or false, got %s", kindName(n))
	return false, false
}

func stringList(c *collector, field string, n *yaml.Node) []string {
	if n.Kind != yaml.SequenceNode {
		c.add(n.Line, field, "must be a list of strings, got %s", kindName(n))
		return nil
	}
	var out []string
	for i, item := range n.Content {
		if s, ok := scalarString(c, fmt.Sprintf("%s[%d]", field, i), item); ok {
			out = append(out, s)
		}
	}
	return out
}
