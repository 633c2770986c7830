package shaper

import (
	"bytes"
	"fmt"
	"os"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/config"
)

// LoadTrace reads a Mahimahi trace file into a rate schedule. Its errors
// are those of config.CheckTrace, which checks the file for the config.
func LoadTrace(path string) (*bucket.Schedule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if len(data) > config.MaxTraceBytes {
		return nil, fmt.Errorf("trace %s: larger than %s", path, config.FormatSize(config.MaxTraceBytes))
	}
	s, err := bucket.ParseMahimahiTrace(namedReader{bytes.NewReader(data), path}, config.TraceMTU)
	if err != nil {
		return nil, fmt.Errorf("trace %w", err)
	}
	return s, nil
}

// namedReader gives a reader the Name that ParseMahimahiTrace puts in its
// errors.
type namedReader struct {
	*bytes.Reader
	name string
}

func (r namedReader) Name() string { return r.name }

// emulateSchedule returns the rate schedule e asks for (nil: a constant
// rate). Rates end with a step without a rate, whose time is the loop's
// period.
func emulateSchedule(e *config.EmulateConfig) (*bucket.Schedule, error) {
	switch {
	case e.Trace != "":
		return LoadTrace(e.Trace)
	case len(e.Rates) > 0:
		steps := e.Rates
		period := steps[len(steps)-1].At
		if steps[len(steps)-1].Rate == 0 {
			steps = steps[:len(steps)-1]
		} else {
			period = 0 // no end step: the last rate holds
		}
		bs := make([]bucket.Step, len(steps))
		for i, s := range steps {
			bs[i] = bucket.Step{At: s.At, Rate: s.Rate}
		}
		return bucket.NewRateSchedule(bs, period)
	}
	return nil, nil
}
