package problems

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Competition is a problem set: the competition yaml of reference-kernels.
type Competition struct {
	Path        string
	Name        string
	Description string
	Deadline    time.Time // zero when the file gives none
	Problems    []CompetitionProblem
	// Bad are the problems whose directory did not load: they are named
	// here and the others load, so one broken problem (reference-kernels'
	// nvidia.yaml has one) does not keep a set's others off the box.
	Bad []BadProblem
}

// BadProblem is a problem of a competition whose task did not load.
type BadProblem struct {
	Name      string
	Directory string
	Err       error // a *FieldError: the competition file, line and why
}

// BadErr joins the errors of the competition's bad problems (nil when
// every problem loaded), for callers that want all or nothing.
func (c *Competition) BadErr() error {
	var errs []error
	for _, b := range c.Bad {
		errs = append(errs, b.Err)
	}
	return errors.Join(errs...)
}

// CompetitionProblem is one entry of a competition; Task is loaded from
// Directory, relative to the competition file.
type CompetitionProblem struct {
	Directory string
	Name      string
	Deadline  time.Time
	GPUs      []string
	Task      *Task
}

// Deadlines in the wild are dates ("2100-12-31"), minutes without a zone
// ("2025-11-29 6:59") or RFC 3339; times without a zone are UTC.
var deadlineLayouts = []string{time.RFC3339, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02 3:04", "2006-01-02T15:04", "2006-01-02"}

// ParseDeadline reads a deadline in any of the layouts problem sets use.
func ParseDeadline(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range deadlineLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date (2006-01-02), a time (2006-01-02 15:04) or RFC 3339", s)
}

// LoadCompetition reads a competition file and every problem it lists.
// Errors in the file itself fail it, reported together with its problems'
// errors; a problem whose task does not load is put in Bad and the rest
// still load.
func LoadCompetition(path string) (*Competition, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("load competition %s: %w", path, err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("load competition %s: %w", path, err)
	}
	c := &collector{file: abs}
	comp := &Competition{Path: abs}
	root := parseYAMLDoc(c, data)
	if root == nil {
		return nil, c.err()
	}
	var problemErrs []*FieldError
	seenNames := map[string]bool{}
	for _, kv := range pairs(c, "", root) {
		k, v := kv[0], kv[1]
		switch k.Value {
		case "name":
			comp.Name, _ = scalarString(c, "name", v)
		case "description":
			comp.Description, _ = scalarString(c, "description", v)
		case "deadline":
			// reference-kernels' pmpp_v2.yaml says deadline: "" for none.
			if s, ok := scalarString(c, "deadline", v); ok && strings.TrimSpace(s) != "" {
				d, err := ParseDeadline(s)
				if err != nil {
					c.add(v.Line, "deadline", "%v", err)
				}
				comp.Deadline = d
			}
		case "problems":
			if v.Kind != yaml.SequenceNode {
				c.add(v.Line, "problems", "must be a list, got %s", kindName(v))
				continue
			}
			for i, item := range v.Content {
				field := fmt.Sprintf("problems[%d]", i)
				var p CompetitionProblem
				for _, pkv := range pairs(c, field, item) {
					pk, pv := pkv[0], pkv[1]
					switch pk.Value {
					case "directory":
						p.Directory, _ = scalarString(c, field+".directory", pv)
					case "name":
						p.Name, _ = scalarString(c, field+".name", pv)
					case "deadline":
						if s, ok := scalarString(c, field+".deadline", pv); ok && strings.TrimSpace(s) != "" {
							d, err := ParseDeadline(s)
							if err != nil {
								c.add(pv.Line, field+".deadline", "%v", err)
							}
							p.Deadline = d
						}
					case "gpus":
						p.GPUs = stringList(c, field+".gpus", pv)
					default:
						c.add(pk.Line, field+"."+pk.Value, "unknown key; a problem has directory, name, deadline, gpus")
					}
				}
				if p.Directory == "" {
					c.add(item.Line, field+".directory", "is required")
					continue
				}
				if p.Name == "" {
					p.Name = filepath.Base(p.Directory)
				}
				if seenNames[p.Name] {
					c.add(item.Line, field+".name", "%q is used by two problems", p.Name)
				}
				seenNames[p.Name] = true
				if p.Deadline.IsZero() {
					p.Deadline = comp.Deadline
				}
				task, err := LoadTask(filepath.Join(filepath.Dir(abs), filepath.FromSlash(p.Directory)))
				if err != nil {
					fe := &FieldError{File: abs, Line: item.Line, Field: field, Msg: err.Error()}
					problemErrs = append(problemErrs, fe)
					comp.Bad = append(comp.Bad, BadProblem{Name: p.Name, Directory: p.Directory, Err: fe})
					continue
				}
				p.Task = task
				comp.Problems = append(comp.Problems, p)
			}
		default:
			c.add(k.Line, k.Value, "unknown field; a competition has name, description, deadline, problems")
		}
	}
	if comp.Name == "" {
		c.add(0, "name", "is required")
	}
	if len(c.errs) > 0 {
		c.errs = append(c.errs, problemErrs...)
		return nil, c.err()
	}
	return comp, nil
}
