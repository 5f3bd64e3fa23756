package problems

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every validation error, so callers can tell a bad
// problem from an I/O failure.
var ErrInvalid = errors.New("invalid problem")

// FieldError is one thing wrong with one field of a problem or competition
// file. Line is 0 when the field is missing altogether.
type FieldError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

func (e *FieldError) Unwrap() error { return ErrInvalid }

// ValidationError collects every FieldError found in one file, so an author
// fixes them in one pass instead of one per run.
type ValidationError struct {
	Errs []*FieldError
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		msgs[i] = fe.Error()
	}
	return strings.Join(msgs, "\n")
}

func (e *ValidationError) Unwrap() error { return ErrInvalid }

// collector gathers field errors while a file is validated.
type collector struct {
	file string
	errs []*FieldError
}

func (c *collector) add(line int, field, format string, args ...any) {
	c.errs = append(c.errs, &FieldError{File: c.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return &ValidationError{Errs: c.errs}
}
