package config

// Clone returns a copy of c that an editor may change without changing
// c: the classes, their per-key limits, emulation, global limits and
// autorate settings are copied; the rest (the scenario, the circuits'
// file names, the sections a change never edits) is shared. The copy has
// no record of file positions: its errors name settings, not lines of a
// file that does not hold them.
func (c *Config) Clone() *Config {
	dir := func(dc DirectionConfig) DirectionConfig {
		dc.Classes = append([]ClassConfig(nil), dc.Classes...)
		for i := range dc.Classes {
			dc.Classes[i].Per = dc.Classes[i].Per.Clone()
			dc.Classes[i].Emulate = dc.Classes[i].Emulate.Clone()
			dc.Classes[i].Global = dc.Classes[i].Global.Clone()
		}
		if dc.Default != nil {
			def := *dc.Default
			def.Per = def.Per.Clone()
			def.Emulate = def.Emulate.Clone()
			def.Global = def.Global.Clone()
			dc.Default = &def
		}
		dc.Emulate = dc.Emulate.Clone()
		dc.Global = dc.Global.Clone()
		dc.Autorate = dc.Autorate.Clone()
		return dc
	}
	return &Config{
		Link:     c.Link,
		Metrics:  c.Metrics,
		Control:  c.Control,
		Egress:   dir(c.Egress),
		Ingress:  dir(c.Ingress),
		Gateway:  c.Gateway,
		Redis:    c.Redis,
		Circuits: c.Circuits,
		Scenario: c.Scenario,
	}
}
