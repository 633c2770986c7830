package shaper

import (
	"bytes"
	"fmt"
	"os"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/emulate"
)

// Link emulation's settings as the workers use them, from the config: the
// impairments (emulate.Settings) and the rate schedules (traces, rates).

// emuSettings converts a config's link emulation for package emulate;
// nil when it emulates nothing the data path does per packet (rate
// schedules live in the buckets). Its draws are told apart from other
// emulations' by name (emulate.Salt); a change starts them anew, and an
// on/off link's first up period at now (link clock).
func emuSettings(e config.EmulateConfig, name string, now int64) *emulate.Settings {
	c := e.Correlation
	s := &emulate.Settings{
		Delay: e.Delay, Jitter: e.Jitter, Dist: emulate.Distribution(e.Distribution), Reorder: e.Reorder,
		Loss: e.Loss / 100, Duplicate: e.Duplicate / 100, Corrupt: e.Corrupt / 100,
		Early: e.ReorderChance / 100, Gap: uint32(e.ReorderGap),
		Corr: emulate.Correlation{Delay: c.Delay / 100, Loss: c.Loss / 100, Duplicate: c.Duplicate / 100, Corrupt: c.Corrupt / 100, Early: c.Reorder / 100},
	}
	if g := e.LossModel; g != nil {
		s.GE = &emulate.GilbertElliott{P: g.P / 100, R: g.R / 100, H: g.H / 100, K: g.K / 100}
	}
	if o := e.OnOff; o != nil {
		s.OnOff = emulate.NewOnOff(o.On, o.Off, o.Exponential, now, emulate.Salt(name+"/onoff"))
	}
	if o := e.Slot; o != nil {
		s.Slots = emulate.NewSlots(o.Min, o.Max, int64(o.Packets), int64(o.Bytes), now, emulate.Salt(name+"/slot"))
	}
	if *s == (emulate.Settings{}) {
		return nil
	}
	s.Streams = emulate.NewStreams(emulate.Salt(name))
	return s
}

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

// Local rates of a global class that its lease cannot express as bytes
// per second: a bucket's rate is never 0, and "unlimited" is a rate no
// device reaches.
const (
	// HoldRate is the local rate of a global class that holds: a grant of
	// zero, the fallback hold, or no grant yet.
	HoldRate = 1
	// OpenRate is the local rate of a global class whose fallback is open
	// (8 Tbit/s).
	OpenRate = 1 << 40
)
