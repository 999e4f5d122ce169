package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"nanohost/internal/pipeline/lint/didyoumean"
)

// Reading nanohost.yaml so that `config check` can tell about every
// problem at once, each at its line: a misspelt key or a value of the wrong
// type is a problem found while reading (the rest of the file is still
// read and checked), not an error that stops at the first one. Only YAML
// that does not parse at all stops the reading.

// positions maps a setting's path, as problems name it ("runtime.memory",
// "groups[0].chat"), to the line it is written on.
type positions map[string]int

// decodeChecked decodes data into c, leaving settings it cannot decode at
// their defaults, and returns the problems found on the way and where
// each setting is written.
func decodeChecked(data []byte, c *Config) ([]Problem, positions, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, nil, err
	}
	if len(root.Content) == 0 {
		return nil, positions{}, nil // an empty file: the defaults
	}
	lines := positions{}
	problems := walkKnown(root.Content[0], reflect.TypeOf(*c), "", lines)
	if err := root.Content[0].Decode(c); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, nil, err
		}
		problems = append(problems, typeProblems(te, lines)...)
	}
	sort.SliceStable(problems, func(i, j int) bool { return lines[problems[i].Field] < lines[problems[j].Field] })
	return problems, lines, nil
}

// walkKnown records the line of every setting under n (whose Go type is t)
// and reports the keys t does not have.
func walkKnown(n *yaml.Node, t reflect.Type, path string, lines positions) []Problem {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	var ps []Problem
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			if key.Value == "<<" {
				continue // a merge key: its settings are checked where they are written
			}
			sub := join(path, key.Value)
			lines[sub] = key.Line
			f, ok := fields[key.Value]
			if !ok {
				ps = append(ps, unknownKey(sub, key, fields))
				continue
			}
			ps = append(ps, walkKnown(value, f.Type, sub, lines)...)
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			sub := join(path, n.Content[i].Value)
			lines[sub] = n.Content[i].Line
			ps = append(ps, walkKnown(n.Content[i+1], t.Elem(), sub, lines)...)
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, item := range n.Content {
			sub := fmt.Sprintf("%s[%d]", path, i)
			lines[sub] = item.Line
			ps = append(ps, walkKnown(item, t.Elem(), sub, lines)...)
		}
	}
	return ps
}

// yamlFields are a struct's settings by their YAML names.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	return out
}

func unknownKey(path string, key *yaml.Node, fields map[string]reflect.StructField) Problem {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	fix := "remove it (nanohost.example.yaml lists every setting)"
	if guess := didyoumean.Closest(key.Value, names); guess != "" {
		fix = "did you mean " + join(parentPath(path), guess) + "? nanohost.example.yaml lists every setting"
	}
	return Problem{Field: path, Message: "is not a setting nanohost knows", Fix: fix, Blocking: true}
}

// parentPath is the section path is in: runtime.imgae → runtime.
func parentPath(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// typeMismatch is one of yaml.v3's "cannot unmarshal" messages.
var typeMismatch = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+) `(.*)` into (.+)$")

// typeProblems turns yaml.v3's type errors into problems at their settings.
func typeProblems(te *yaml.TypeError, lines positions) []Problem {
	byLine := map[int]string{}
	for path, line := range lines {
		if cur, ok := byLine[line]; !ok || len(path) > len(cur) {
			byLine[line] = path // the innermost setting on that line
		}
	}
	var ps []Problem
	for _, msg := range te.Errors {
		m := typeMismatch.FindStringSubmatch(msg)
		if m == nil {
			ps = append(ps, Problem{Field: "(file)", Message: msg, Fix: "correct the value", Blocking: true})
			continue
		}
		line, _ := strconv.Atoi(m[1])
		field := byLine[line]
		if field == "" {
			field = fmt.Sprintf("(line %d)", line)
		}
		want, example := wanted(m[4])
		ps = append(ps, Problem{Field: field, Message: fmt.Sprintf("%q is not %s", m[3], want),
			Fix: "write " + example, Blocking: true})
	}
	return ps
}

// wanted describes a Go type as a value people write, with an example.
func wanted(goType string) (what, example string) {
	switch goType {
	case "int", "int64", "int32", "uint", "uint64":
		return "a whole number", "a number such as 5"
	case "float64", "float32":
		return "a number", "a number such as 1.5"
	case "bool":
		return "true or false", "true or false"
	case "time.Duration", reflect.TypeOf(time.Duration(0)).String():
		return "a duration", "a duration such as 90s or 10m"
	case "string", "config.Secret":
		return "text", "text (quote it if it looks like a number or a list)"
	}
	if strings.HasPrefix(goType, "[]") {
		return "a list", "a list, e.g. [a, b] or one item per line starting with -"
	}
	if strings.HasPrefix(goType, "map[") || strings.HasPrefix(goType, "config.") || strings.HasPrefix(goType, "mask.") {
		return "a section of settings", "settings indented under it (key: value)"
	}
	return "a " + goType, "a value of the right kind (see nanohost.example.yaml)"
}
