package libreqos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// maxDepth bounds the nesting of network.json's nodes (sites in sites):
// far beyond any network, near enough to refuse a file built to exhaust
// the reader.
const maxDepth = 64

// ReadNetwork reads network.json from data (name is the file's name in
// errors): a JSON object whose keys are the top nodes' names, each an
// object with downloadBandwidthMbps and uploadBandwidthMbps (numbers,
// decimals allowed), optionally a type and children (an object of nodes
// in the same form). Other keys of a node are read past. It returns the
// nodes parents first, in the file's order. Every problem is an *Error
// with the line and column of the name or value it is about: a node
// without a bandwidth, a bandwidth that is not a rate, a name used twice
// anywhere in the file (circuits name their parent by it), JSON that is
// not of this form.
func ReadNetwork(name string, data []byte) ([]Node, error) {
	r := &networkReader{data: data, lines: lineStarts(data), errs: errorList{file: name}, seen: map[string]int{}}
	r.dec = json.NewDecoder(bytes.NewReader(data))
	r.dec.UseNumber()
	if err := r.object("", 0); err != nil {
		line, col := r.position(r.dec.InputOffset())
		var syn *json.SyntaxError
		var form *formError
		switch {
		case errors.As(err, &syn):
			line, col = r.position(syn.Offset)
		case errors.As(err, &form):
			line, col = r.position(form.off)
		}
		r.errs.push(line, col, "%v", err)
		return nil, r.errs.err()
	}
	end := r.dec.InputOffset()
	if _, err := r.dec.Token(); err != io.EOF {
		line, col := r.position(end)
		r.errs.add(line, col, "more JSON after the network's object")
	}
	if err := r.errs.err(); err != nil {
		return nil, err
	}
	return r.nodes, nil
}

type networkReader struct {
	data  []byte
	lines []int
	dec   *json.Decoder
	nodes []Node
	seen  map[string]int // node name -> index in nodes
	errs  errorList
}

// formError stops the reader where the JSON is not of the network's form;
// ReadNetwork reports it, as a JSON syntax error, at the decoder's offset.
type formError struct {
	what string
	off  int64 // where the value in question starts
}

func (e *formError) Error() string { return e.what }

// object reads an object of nodes (the file, or a node's children) whose
// parent is parent.
func (r *networkReader) object(parent string, depth int) error {
	if depth > maxDepth {
		return &formError{what: fmt.Sprintf("nodes nested more than %d deep", maxDepth), off: r.dec.InputOffset()}
	}
	if err := r.delim('{', "an object of nodes (name: {downloadBandwidthMbps, uploadBandwidthMbps, children})"); err != nil {
		return err
	}
	for r.dec.More() {
		at := r.dec.InputOffset()
		t, err := r.dec.Token()
		if err != nil {
			return err
		}
		key := t.(string) // an object's keys are strings
		line, col := r.position(at)
		if err := r.node(key, parent, line, col, depth); err != nil {
			return err
		}
	}
	_, err := r.dec.Token() // '}'
	return err
}

// node reads the object of the node name, whose name stands at line:col.
func (r *networkReader) node(name, parent string, line, col, depth int) error {
	if err := r.delim('{', fmt.Sprintf("node %q: an object", name)); err != nil {
		return err
	}
	n := Node{Name: name, Parent: parent, Line: line, Column: col}
	switch {
	case name == "":
		r.errs.add(line, col, "a node needs a name")
	default:
		if i, ok := r.seen[name]; ok {
			r.errs.add(line, col, "node %q again (first at line %d): circuits name their parent node, so names must be unique", name, r.nodes[i].Line)
		}
	}
	idx := len(r.nodes)
	r.nodes = append(r.nodes, n)
	if _, ok := r.seen[name]; !ok {
		r.seen[name] = idx
	}
	var down, up bool
	for r.dec.More() {
		t, err := r.dec.Token()
		if err != nil {
			return err
		}
		key := t.(string)
		at := r.dec.InputOffset()
		switch key {
		case "downloadBandwidthMbps", "uploadBandwidthMbps":
			v, err := r.number(at, name, key)
			if err != nil {
				return err
			}
			if key == "downloadBandwidthMbps" {
				r.nodes[idx].Download, down = v, true
			} else {
				r.nodes[idx].Upload, up = v, true
			}
		case "type":
			t, err := r.dec.Token()
			if err != nil {
				return err
			}
			if s, ok := t.(string); ok {
				r.nodes[idx].Type = s
			} else {
				l, c := r.position(at)
				r.errs.add(l, c, "node %q: type: want a string", name)
				if err := r.skipRest(t); err != nil {
					return err
				}
			}
		case "children":
			if err := r.object(name, depth+1); err != nil {
				return err
			}
		default:
			if err := r.skip(); err != nil {
				return err
			}
		}
	}
	if _, err := r.dec.Token(); err != nil { // '}'
		return err
	}
	var missing []string
	if !down {
		missing = append(missing, "downloadBandwidthMbps")
	}
	if !up {
		missing = append(missing, "uploadBandwidthMbps")
	}
	if len(missing) > 0 {
		r.errs.add(line, col, "node %q has no %v", name, missing)
	}
	return nil
}

// number reads a bandwidth value (its value starts after offset at) as
// bits per second; a value that is not a rate is reported and read as 0.
func (r *networkReader) number(at int64, node, key string) (uint64, error) {
	t, err := r.dec.Token()
	if err != nil {
		return 0, err
	}
	line, col := r.position(at)
	num, ok := t.(json.Number)
	if !ok {
		r.errs.add(line, col, "node %q: %s: want a number of Mbit/s", node, key)
		return 0, r.skipRest(t)
	}
	f, err := num.Float64()
	if err != nil {
		r.errs.add(line, col, "node %q: %s: %v", node, key, err)
		return 0, nil
	}
	v, err := mbps(f)
	if err != nil {
		r.errs.add(line, col, "node %q: %s: %v", node, key, err)
	}
	return v, nil
}

// delim reads the next token, which must be d.
func (r *networkReader) delim(d json.Delim, want string) error {
	at := r.dec.InputOffset()
	t, err := r.dec.Token()
	if err != nil {
		return err
	}
	if got, ok := t.(json.Delim); !ok || got != d {
		return &formError{what: "want " + want, off: at}
	}
	return nil
}

// skip reads past one value.
func (r *networkReader) skip() error {
	t, err := r.dec.Token()
	if err != nil {
		return err
	}
	return r.skipRest(t)
}

// skipRest reads past the rest of the value that began with t.
func (r *networkReader) skipRest(t json.Token) error {
	if d, ok := t.(json.Delim); !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := r.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// position is the line and column of the first token at or after offset
// off (past blanks, commas and colons).
func (r *networkReader) position(off int64) (line, col int) {
	i := int(min(max(off, 0), int64(len(r.data))))
	for i < len(r.data) {
		switch r.data[i] {
		case ' ', '\t', '\r', '\n', ',', ':':
			i++
			continue
		}
		break
	}
	return lineCol(r.lines, i)
}

// lineStarts returns the offsets at which data's lines start.
func lineStarts(data []byte) []int {
	starts := []int{0}
	for i, b := range data {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// lineCol converts an offset to a 1-based line and column (in bytes).
func lineCol(starts []int, off int) (int, int) {
	l := sort.Search(len(starts), func(i int) bool { return starts[i] > off }) - 1
	return l + 1, off - starts[l] + 1
}
