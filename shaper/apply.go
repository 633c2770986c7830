package shaper

import (
	"fmt"
	"reflect"

	"github.com/pacer-dev/pacer/config"
)

// A running link's policy changes: a whole new config (Apply), or one
// class's settings (ApplyClass).

// install compiles and installs both directions' policies.
func (l *Link) install(egress, ingress config.DirectionConfig) error {
	now := l.now()
	l.global.rateMu.Lock() // a global direction's leased rate stays put until the new policy is in
	defer l.global.rateMu.Unlock()
	egress.Rate = l.directionRateOf(0, egress)
	ingress.Rate = l.directionRateOf(1, ingress)
	oldE, oldIn := l.egress.Load(), l.ingress.Load()
	e, err := l.compile(Egress, egress, oldE, now)
	if err != nil {
		return err
	}
	in, err := l.compile(Ingress, ingress, oldIn, now)
	if err != nil {
		return err
	}
	if e != oldE {
		l.egress.Store(e)
	}
	if in != oldIn {
		l.ingress.Store(in)
	}
	return nil
}

// compile is newDirection, or old itself where cfg is what old was
// compiled from: a change of one circuit among ten thousand then rebuilds
// one direction, not two.
func (l *Link) compile(name string, cfg config.DirectionConfig, old *direction, now int64) (*direction, error) {
	if old != nil && reflect.DeepEqual(old.cfg, cfg) {
		return old, nil
	}
	return newDirection(name, cfg, old, l.queues, now)
}

// Apply installs new policies while traffic flows. Classes that keep their
// name keep their counters, their held packets and the tokens in their
// buckets; the new rates govern from now on. The config must have passed
// Validate; on error the running policies stay. The link keeps the class
// lists of egress and ingress (each class's state points to its element):
// the caller must not change them afterwards (apply a changed copy).
func (l *Link) Apply(egress, ingress config.DirectionConfig) error {
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	if err := l.install(egress, ingress); err != nil {
		return err
	}
	if l.started {
		l.syncGlobal()
		l.syncAutorate()
	}
	return nil
}

// ApplyClass installs cfg as the policy of direction dir (Egress or
// Ingress) while traffic flows, as Apply does, where the caller knows that
// cfg differs from the running policy in the settings of class name
// alone: a live change of one class (pacerctl set). Where the change
// keeps the class's match and its place in the tree, only that class's
// new state is built; else the direction is compiled whole. The config
// must have passed Validate; on error the running policy stays. As with
// Apply, the link keeps cfg's class list.
func (l *Link) ApplyClass(dir string, cfg config.DirectionConfig, name string) error {
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	if err := l.installClass(dir, cfg, name); err != nil {
		return err
	}
	if l.started {
		l.syncGlobal()
		l.syncAutorate()
	}
	return nil
}

// installClass is install for one direction whose change is class name's
// alone.
func (l *Link) installClass(dir string, cfg config.DirectionConfig, name string) error {
	i, p := 0, &l.egress
	switch dir {
	case Egress:
	case Ingress:
		i, p = 1, &l.ingress
	default:
		return fmt.Errorf("no direction %q", dir)
	}
	now := l.now()
	l.global.rateMu.Lock()
	defer l.global.rateMu.Unlock()
	cfg.Rate = l.directionRateOf(i, cfg)
	old := p.Load()
	if old != nil && old.cfg.Rate == cfg.Rate {
		d, ok, err := old.patched(cfg, name, now)
		if err != nil {
			return err
		}
		if ok {
			p.Store(d)
			return nil
		}
	}
	d, err := l.compile(dir, cfg, old, now)
	if err != nil {
		return err
	}
	if d != old {
		p.Store(d)
	}
	return nil
}
