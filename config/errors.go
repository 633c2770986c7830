package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ConfigError is one problem in a config and where it is. Parse,
// Load and Validate return these, joined with errors.Join when there
// are several; errors.As finds the first.
type ConfigError struct {
	// File is the name given to Parse; "" for a Config built in Go.
	File string
	// Line is 1-based; 0 when unknown.
	Line int
	// Path names the setting, such as "egress.classes[0].rate"; "" for the
	// file as a whole.
	Path string
	// Err is the reason.
	Err error
}

// Error returns "file:line: path: reason", leaving out the parts that are
// empty.
func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the reason.
func (e *ConfigError) Unwrap() error { return e.Err }

// source records where a parsed Config came from: the file name and the
// line of every setting by path.
type source struct {
	file  string
	lines map[string]int
}

// line returns the line of path, or of its nearest recorded parent
// ("a.b[2].c", then "a.b[2]", "a.b", "a", ""), or 0.
func (s *source) line(path string) int {
	if s == nil {
		return 0
	}
	for {
		if l, ok := s.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			if path == "" {
				return 0
			}
			path = ""
			continue
		}
		path = path[:i]
	}
}

func (s *source) errorf(path, format string, args ...any) *ConfigError {
	e := &ConfigError{Path: path, Err: fmt.Errorf(format, args...)}
	if s != nil {
		e.File, e.Line = s.file, s.line(path)
	}
	return e
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a yaml.v3 syntax error ("yaml: line 3: reason") into a
// *ConfigError. yaml.v3 leaves the line out of some errors: at the end of
// the input, on the first line, and for bad bytes (control characters,
// invalid UTF-8), which are found here instead.
func yamlError(name string, data []byte, err error) error {
	e := &ConfigError{File: name, Line: 1, Err: err}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Err = fmt.Errorf("yaml: %s", m[2])
		return e
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "end of stream"):
		e.Line = bytes.Count(bytes.TrimRight(data, "\n"), []byte("\n")) + 1
	case strings.Contains(msg, "control characters") || strings.Contains(msg, "UTF-8") || strings.Contains(msg, "UTF-16"):
		if i := badByte(data); i >= 0 {
			e.Line = bytes.Count(data[:i], []byte("\n")) + 1
		}
	}
	return e
}

// badByte returns the offset of the first byte YAML rejects (a control
// character other than tab, CR and LF, or invalid UTF-8), or -1.
func badByte(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 || r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return i
		}
		i += n
	}
	return -1
}

// joinSorted joins *ConfigErrors ordered by line (stable).
func joinSorted(errs []error) error {
	slices.SortStableFunc(errs, func(a, b error) int {
		var ea, eb *ConfigError
		errors.As(a, &ea)
		errors.As(b, &eb)
		if ea == nil || eb == nil {
			return 0
		}
		return cmp.Compare(ea.Line, eb.Line)
	})
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
