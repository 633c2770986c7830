// pacerd's live dashboard. It polls api/v1/history just after each of
// pacerd's one-second samples (asking only for the samples it has not
// seen), keeps the history's window of samples, and draws for each
// direction: charts of rate, borrowed rate (link sharing), queue delay,
// drops, backlog, active flows and ECN marks (and, for a direction with
// rate: auto, its controller's rate and the delay deltas per reflector),
// a table of every class's
// figures at the newest sample (a class tree as a tree: each class's
// children under it, collapsible), and the busiest keys of classes with a
// per-key limit. A class keeps one colour in every chart and table while
// it exists. The page only reads: changes go through pacerctl.
'use strict';
(() => {
  // Colours of classes, in the order classes are first seen; "unclassified"
  // is always grey.
  const PALETTE = ['#1f6fd1', '#d9412b', '#2a9d48', '#e08a00', '#8451c7', '#0f9fb0',
    '#b5447c', '#7a5c3e', '#6f8f1f', '#3b4cc0', '#c7561f', '#4d7f8c'];
  const GREY = '#8a919e';
  const MAX_CHARTED = 10; // classes per direction drawn in the charts
  const MAX_READOUT = 4; // classes per chart in its readout line
  const DASHES = [[], [6, 3], [2, 2], [8, 3, 2, 3], [1, 3]]; // a class's drop reasons

  const state = {
    last: null, // number of the newest sample held
    started: null, // when pacerd's history started: another value is another pacerd
    times: [], // sample times, Unix seconds
    size: 300, // samples kept
    windowSeconds: 300,
    dirs: [], // [{direction, rate, keys: [class key]}], the newest sample's order
    classes: new Map(), // class key -> {direction, meta, since, series: {name: [v]}, dropped: {reason: [v]}}
    autorate: new Map(), // direction -> {meta, since, series: {name: [v]}, reflectors: {address: [v]}}
    colours: new Map(), // class key -> colour
    views: new Map(), // direction -> view
    charted: new Map(), // direction -> {sig, keys, at}
    collapsed: new Set(), // class keys of inner classes whose subtree the table hides
  };

  // ---- Formatting: rates in tc units of bits (1mbit = 10^6 bit/s), sizes
  // in tc units of bytes (1kb = 1024 bytes), as pacerctl prints them.

  const RATE_UNITS = [['tbit', 1e12], ['gbit', 1e9], ['mbit', 1e6], ['kbit', 1e3]];
  const SIZE_UNITS = [['gb', 2 ** 30], ['mb', 2 ** 20], ['kb', 2 ** 10]];
  const DASH = '–';
  // Tick steps of byte axes: 1, 2, 5, 10, ... of b, kb, mb, gb.
  const BYTE_INCRS = [1, 2 ** 10, 2 ** 20, 2 ** 30].flatMap((u) => [1, 2, 5, 10, 20, 50, 100, 200, 500].map((m) => m * u));
  // Tick steps of count axes: whole numbers.
  const COUNT_INCRS = [1, 1e3, 1e6].flatMap((u) => [1, 2, 5, 10, 20, 50, 100, 200, 500].map((m) => m * u));

  // sig3 writes v with three significant digits ("9.99", "10.0", "125").
  function sig3(v) {
    const r = Number(v.toPrecision(3));
    const a = Math.abs(r);
    return a >= 100 ? r.toFixed(0) : a >= 10 ? r.toFixed(1) : r.toFixed(2);
  }
  function trim(s) {
    return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
  }
  function ok(v) {
    return v !== null && v !== undefined && Number.isFinite(v);
  }
  // fmtBits writes bits per second measured: three significant digits.
  function fmtBits(bits) {
    if (!ok(bits)) return DASH;
    for (const [u, d] of RATE_UNITS) if (bits >= d) return sig3(bits / d) + u;
    return Math.round(bits) + 'bit';
  }
  // fmtRate is fmtBits of bytes per second.
  function fmtRate(bytesPerSec) {
    return ok(bytesPerSec) ? fmtBits(bytesPerSec * 8) : DASH;
  }
  // fmtRateExact writes a configured rate (bytes per second) as pacerctl
  // does: the largest unit it reaches, without trailing zeros.
  function fmtRateExact(bytesPerSec) {
    const bits = bytesPerSec * 8;
    for (const [u, d] of RATE_UNITS) if (bits >= d) return trim((bits / d).toFixed(6)) + u;
    return bits + 'bit';
  }
  function fmtBitsAxis(bits) {
    if (bits === 0) return '0';
    for (const [u, d] of RATE_UNITS) if (Math.abs(bits) >= d) return trim((bits / d).toFixed(2)) + u;
    return trim(bits.toFixed(1)) + 'bit';
  }
  function fmtBytes(b) {
    if (!ok(b)) return DASH;
    for (const [u, d] of SIZE_UNITS) if (b >= d) return sig3(b / d) + u;
    return Math.round(b) + 'b';
  }
  function fmtBytesAxis(b) {
    if (b === 0) return '0';
    for (const [u, d] of SIZE_UNITS) if (Math.abs(b) >= d) return trim((b / d).toFixed(1)) + u;
    return trim(b.toFixed(0)) + 'b';
  }
  // fmtDelay writes seconds.
  function fmtDelay(s) {
    if (!ok(s)) return DASH;
    if (s < 1e-3) return (s * 1e6).toFixed(0) + 'µs';
    if (s < 1) return sig3(s * 1e3) + 'ms';
    return sig3(s) + 's';
  }
  function fmtMsAxis(ms) {
    if (ms === 0) return '0';
    if (ms < 1) return trim((ms * 1e3).toFixed(0)) + 'µs';
    if (ms < 1000) return trim(ms.toFixed(1)) + 'ms';
    return trim((ms / 1e3).toFixed(2)) + 's';
  }
  function fmtCount(v) {
    if (!ok(v)) return DASH;
    if (v >= 1e6) return trim((v / 1e6).toFixed(2)) + 'M';
    if (v >= 1e4) return trim((v / 1e3).toFixed(1)) + 'k';
    return v >= 10 || Number.isInteger(v) ? String(Math.round(v)) : trim(v.toFixed(1));
  }
  function fmtTime(unixSeconds) {
    const d = new Date(unixSeconds * 1000);
    return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
  }

  // ---- DOM helpers (no innerHTML with data; no inline style attributes).

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k === 'colour') e.style.setProperty('--c', v);
      else if (k === 'depth') e.style.setProperty('--depth', v);
      else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'title' || k === 'hidden' || k === 'scope') {
        if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
      } else e[k] = v;
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  function swatch(colour) {
    return el('i', {class: 'sw', colour});
  }

  // ---- State: merge one answer of the history endpoint.

  const key = (dir, cls) => dir + '\u0000' + cls;

  // merge adds an answer to the samples held: appends it when it
  // continues them, else (the first answer, one after a gap, or one from
  // a pacerd that restarted) replaces them.
  function merge(resp) {
    state.size = Math.max(2, Math.round(resp.window_seconds / resp.interval_seconds));
    state.windowSeconds = resp.window_seconds;
    const append = state.last !== null && resp.first === state.last + 1 && resp.started === state.started;
    state.started = resp.started;
    if (!append) {
      state.times = [];
      state.classes.clear();
      state.autorate.clear();
    }
    const old = state.times.length;
    state.times.push(...resp.times);
    state.last = resp.last;
    const n = state.times.length;

    const seen = new Set();
    state.dirs = [];
    for (const d of resp.directions) {
      const keys = [];
      for (const c of d.classes) {
        const k = key(d.direction, c.class);
        seen.add(k);
        keys.push(k);
        let e = state.classes.get(k);
        if (!e || e.since !== c.since) { // new, or removed and added again
          e = {direction: d.direction, since: c.since, series: {}, dropped: {}};
          state.classes.set(k, e);
        }
        e.meta = c;
        for (const [name, vals] of Object.entries(c.series)) {
          if (name === 'dropped_per_second') {
            for (const [reason, rv] of Object.entries(vals)) extend(e.dropped, reason, rv, old);
          } else {
            extend(e.series, name, vals, old);
          }
        }
        for (const obj of [e.series, e.dropped]) {
          for (const a of Object.values(obj)) while (a.length < n) a.push(null);
        }
      }
      state.dirs.push({direction: d.direction, rate: d.rate_bytes_per_second, keys});
      mergeAutorate(d, old, n);
    }
    for (const dir of [...state.autorate.keys()]) {
      if (!resp.directions.some((d) => d.direction === dir && d.autorate)) state.autorate.delete(dir);
    }
    for (const k of [...state.classes.keys()]) {
      if (!seen.has(k)) state.classes.delete(k);
    }
    for (const k of [...state.colours.keys()]) {
      if (!seen.has(k)) state.colours.delete(k);
    }
    for (const k of [...state.collapsed]) {
      if (!seen.has(k)) state.collapsed.delete(k);
    }
    const cut = state.times.length - state.size;
    if (cut > 0) {
      state.times.splice(0, cut);
      for (const e of state.classes.values()) {
        for (const obj of [e.series, e.dropped]) for (const a of Object.values(obj)) a.splice(0, cut);
      }
      for (const e of state.autorate.values()) {
        for (const obj of [e.series, e.reflectors]) for (const a of Object.values(obj)) a.splice(0, cut);
      }
    }
    // Colours in the order classes appear, egress first.
    for (const d of state.dirs) for (const k of d.keys) colourOf(k);
  }

  // mergeAutorate adds a direction's autorate series (rate: auto) to the
  // samples held, as merge does a class's; a reflector no longer listed
  // is dropped.
  function mergeAutorate(d, old, n) {
    const a = d.autorate;
    if (!a) return;
    let e = state.autorate.get(d.direction);
    if (!e || e.since !== a.since) {
      e = {since: a.since, series: {}, reflectors: {}};
      state.autorate.set(d.direction, e);
    }
    e.meta = a;
    extend(e.series, 'rate', a.rate_bytes_per_second, old);
    extend(e.series, 'achieved', a.achieved_bytes_per_second, old);
    extend(e.series, 'delta', a.delta_seconds, old);
    const listed = new Set();
    for (const r of a.reflectors) {
      listed.add(r.address);
      extend(e.reflectors, r.address, r.delta_seconds, old);
    }
    for (const addr of Object.keys(e.reflectors)) if (!listed.has(addr)) delete e.reflectors[addr];
    for (const obj of [e.series, e.reflectors]) {
      for (const s of Object.values(obj)) while (s.length < n) s.push(null);
    }
  }

  // extend appends vals to obj[name], first padding it with nulls to old
  // samples (a series the class did not have before).
  function extend(obj, name, vals, old) {
    let a = obj[name];
    if (!a) a = obj[name] = [];
    while (a.length < old) a.push(null);
    if (a.length > old) a.length = old;
    for (const v of vals) a.push(v);
  }

  function colourOf(k) {
    const e = state.classes.get(k);
    if (e && e.meta.class === 'unclassified') return GREY;
    let c = state.colours.get(k);
    if (c) return c;
    const used = new Set(state.colours.values());
    c = PALETTE.find((p) => !used.has(p));
    if (!c) c = `hsl(${(state.colours.size * 137.5) % 360}, 60%, 42%)`;
    state.colours.set(k, c);
    return c;
  }

  // ---- Charts.

  const last = (a) => (a && a.length ? a[a.length - 1] : null);
  const scale = (a, f) => a.map((v) => (ok(v) ? v * f : null));
  const anyAbove0 = (a) => a.some((v) => ok(v) && v > 0);
  const anyValue = (a) => a.some(ok);

  // The charts of a direction. Each lists its series for the charted
  // classes: {cls, label, values, dash, width}; readout(cls, i) is the
  // text a class gets in the chart's readout line at sample i.
  const CHARTS = [
    {
      id: 'rate', title: 'Rate', hint: 'achieved ── configured ╌╌', axis: fmtBitsAxis,
      series: (c) => {
        const s = [{cls: c, label: c.meta.class + ' achieved', values: scale(c.series.sent_bytes_per_second, 8), width: 2}];
        if (c.meta.rate_bytes_per_second > 0) {
          s.push({cls: c, label: c.meta.class + ' configured', values: scale(c.series.rate_bytes_per_second, 8), width: 1.25, dash: [5, 4]});
        }
        return s;
      },
      readout: (c, i) => {
        const r = c.series.rate_bytes_per_second[i];
        return fmtRate(c.series.sent_bytes_per_second[i]) + (r > 0 ? ' / ' + fmtRateExact(r) : '');
      },
    },
    {
      // Link sharing: what each leaf of a class tree sends beyond its own
      // rate. Leaves only: an inner class's borrowing is its subtree's.
      id: 'borrowed', title: 'Borrowed', hint: 'leaves: sent beyond their rate', axis: fmtBitsAxis,
      series: (c) => c.meta.sharing && !c.inner && c.series.borrowed_bytes_per_second ?
        [{cls: c, label: c.meta.class + ' borrowed', values: scale(c.series.borrowed_bytes_per_second, 8), width: 1.5}] : [],
      readout: (c, i) => fmtRate(c.series.borrowed_bytes_per_second[i]),
      hideEmpty: true,
    },
    {
      id: 'delay', title: 'Queue delay', hint: 'p99 ── p50 ╌╌', axis: fmtMsAxis,
      series: (c) => anyValue(c.series.delay_p99_seconds) ? [
        {cls: c, label: c.meta.class + ' p99', values: scale(c.series.delay_p99_seconds, 1e3), width: 2},
        {cls: c, label: c.meta.class + ' p50', values: scale(c.series.delay_p50_seconds, 1e3), width: 1.25, dash: [5, 4]},
      ] : [],
      readout: (c, i) => fmtDelay(c.series.delay_p50_seconds[i]) + ' / ' + fmtDelay(c.series.delay_p99_seconds[i]),
      empty: 'No packet sent yet',
    },
    {
      id: 'drops', title: 'Drops', hint: 'packets/s by reason', axis: fmtCount, incrs: COUNT_INCRS,
      // A class's first dropping reason (by name) is drawn solid, the
      // next ones dashed; the readout names them.
      series: (c) => Object.keys(c.dropped).sort().filter((r) => anyAbove0(c.dropped[r])).map((r, i) => ({
        cls: c, label: c.meta.class + ' ' + r, values: c.dropped[r], width: 1.5, dash: DASHES[Math.min(i, DASHES.length - 1)],
      })),
      readout: (c, i) => {
        const parts = Object.keys(c.dropped).sort().filter((r) => ok(c.dropped[r][i]) && c.dropped[r][i] > 0)
          .map((r) => r + ' ' + fmtCount(c.dropped[r][i]));
        return parts.length ? parts.join(', ') : '0';
      },
      readoutIf: (c) => Object.values(c.dropped).some(anyAbove0),
      empty: () => 'No drops in the last ' + fmtWindow(),
    },
    {
      id: 'backlog', title: 'Backlog', hint: 'bytes held', axis: fmtBytesAxis, incrs: BYTE_INCRS,
      series: (c) => c.meta.mode === 'shape' ? [{cls: c, label: c.meta.class + ' backlog', values: c.series.backlog_bytes, width: 1.5}] : [],
      readout: (c, i) => fmtBytes(c.series.backlog_bytes[i]),
      empty: 'No shaping class holds packets',
    },
    {
      id: 'flows', title: 'Active flows', hint: 'fair-queued classes', axis: fmtCount, incrs: COUNT_INCRS,
      series: (c) => c.meta.queue === 'fq' ? [{cls: c, label: c.meta.class + ' flows', values: c.series.active_flows, width: 1.5}] : [],
      readout: (c, i) => fmtCount(c.series.active_flows[i]),
      hideEmpty: true,
    },
    {
      id: 'marks', title: 'ECN marks', hint: 'packets/s marked CE', axis: fmtCount, incrs: COUNT_INCRS,
      series: (c) => c.meta.queue === 'fq' ? [{cls: c, label: c.meta.class + ' marks', values: c.series.marked_per_second, width: 1.5}] : [],
      readout: (c, i) => fmtCount(c.series.marked_per_second[i]),
      hideEmpty: true,
    },
  ];
  function fmtWindow() {
    const m = state.windowSeconds / 60;
    return m >= 1 ? trim(m.toFixed(1)) + (m === 1 ? ' minute' : ' minutes') : state.windowSeconds + ' seconds';
  }

  // chartedClasses picks up to MAX_CHARTED classes of a direction: all of
  // them when there are few; else the busiest by mean achieved rate over
  // the window, chosen again when the classes change or every 30 s, so
  // that series do not come and go every second.
  function chartedClasses(d) {
    const sig = d.keys.join('\u0001');
    let ch = state.charted.get(d.direction);
    const now = Date.now();
    if (!ch || ch.sig !== sig || (d.keys.length > MAX_CHARTED && now - ch.at > 30000)) {
      let keys = d.keys;
      if (keys.length > MAX_CHARTED) {
        const mean = (k) => {
          const a = state.classes.get(k).series.sent_bytes_per_second || [];
          let s = 0;
          for (const v of a) if (ok(v)) s += v;
          return s;
        };
        const rank = new Map(keys.map((k) => [k, mean(k)]));
        const top = new Set([...keys].sort((a, b) => rank.get(b) - rank.get(a)).slice(0, MAX_CHARTED));
        keys = keys.filter((k) => top.has(k));
      }
      ch = {sig, keys, at: now};
      state.charted.set(d.direction, ch);
    }
    return ch.keys.map((k) => state.classes.get(k)).filter(Boolean);
  }

  // ---- A direction's view.

  const TITLES = {egress: 'egress', ingress: 'ingress'};
  const SUBS = {egress: 'inner → outer', ingress: 'outer → inner'};

  function newView(direction) {
    const v = {direction, charts: new Map()};
    v.title = el('h2', {text: TITLES[direction] || direction});
    v.sub = el('span', {class: 'sub'});
    v.legend = el('div', {class: 'legend'});
    v.grid = el('div', {class: 'charts'});
    v.auto = newAutorateChart();
    v.grid.append(v.auto.fig);
    for (const spec of CHARTS) {
      const c = {spec, u: null, sig: '', series: []};
      c.readout = el('div', {class: 'readout'});
      c.plot = el('div', {class: 'plot'});
      c.nodata = el('p', {class: 'nodata', hidden: true});
      c.fig = el('figure', {class: 'chart', 'data-chart': spec.id},
        el('figcaption', {}, el('span', {text: spec.title}), el('span', {class: 'hint', text: spec.hint})),
        c.readout, c.plot, c.nodata);
      v.charts.set(spec.id, c);
      v.grid.append(c.fig);
    }
    v.tbody = el('tbody');
    v.thead = el('thead');
    v.tree = null; // whether the header has the tree's columns
    v.table = el('table', {class: 'classes'}, v.thead, v.tbody);
    v.keys = el('div', {class: 'keys'});
    v.section = el('section', {class: 'dir', 'data-direction': direction},
      el('div', {class: 'dir-head'}, v.title, v.sub), v.legend, v.grid,
      el('div', {class: 'table-wrap'}, v.table), v.keys);
    const ro = new ResizeObserver(() => resize(v));
    ro.observe(v.grid);
    v.ro = ro;
    return v;
  }

  function plotSize(c) {
    const w = Math.max(200, Math.floor(c.plot.clientWidth || c.fig.clientWidth - 16));
    return {width: w, height: window.innerWidth <= 640 ? 150 : 165};
  }

  function resize(v) {
    for (const c of v.charts.values()) if (c.u) c.u.setSize(plotSize(c));
    if (v.auto.u) v.auto.u.setSize(plotSize(v.auto));
  }

  function updateView(v, d) {
    const classes = d.keys.map((k) => state.classes.get(k)).filter(Boolean);
    const rows = treeRows(classes);
    v.d = d;
    v.rows = rows;
    v.sub.textContent = (SUBS[d.direction] || '') + (d.rate > 0 ? ' · total ' + fmtRateExact(d.rate) : '');

    // Legend: the charted classes (the table lists every class).
    const charted = chartedClasses(d);
    v.legend.replaceChildren(...charted.map((c) => el('span', {class: 'chip', 'data-class': c.meta.class},
      swatch(colourOf(key(d.direction, c.meta.class))), el('span', {text: c.meta.class}),
      el('span', {class: 'mode', text: modeText(c.meta)}))));
    if (charted.length < classes.length) {
      v.legend.append(el('span', {class: 'note', text: `charts show the ${charted.length} busiest of ${classes.length} classes; the table lists them all`}));
    }

    updateAutorate(v, state.autorate.get(d.direction));
    for (const c of v.charts.values()) updateChart(v, c, charted);
    updateTable(v, d, rows);
    updateKeys(v, d, classes);
  }

  // treeRows orders a direction's classes as their tree (link sharing)
  // reads top down: each class followed by its children, in the
  // direction's order; classes outside a tree (or whose parent is not
  // listed) stay where they are. Each row is {c, depth, parent, inner};
  // it also marks each class's entry inner or not, for the charts.
  function treeRows(classes) {
    const names = new Set(classes.map((c) => c.meta.class));
    const children = new Map();
    const top = [];
    for (const c of classes) {
      const p = c.meta.sharing ? c.meta.sharing.parent : '';
      if (p && names.has(p) && p !== c.meta.class) {
        if (!children.has(p)) children.set(p, []);
        children.get(p).push(c);
      } else {
        top.push(c);
      }
    }
    const rows = [];
    const add = (c, depth, parent) => {
      const kids = children.get(c.meta.class) || [];
      c.inner = kids.length > 0;
      rows.push({c, depth, parent, inner: c.inner});
      if (depth < 8) for (const k of kids) add(k, depth + 1, c.meta.class);
    };
    for (const c of top) add(c, 0, '');
    return rows;
  }

  // tableHead writes the table's header: with the tree's columns
  // (borrowed, ceil, priority) in a direction whose classes form a tree.
  function tableHead(tree) {
    const th = (t, cls, title) => el('th', {scope: 'col', class: cls, text: t, title});
    return el('tr', {},
      th('class'), th('achieved', '', 'sent over the last second'),
      tree ? th('borrowed', '', 'sent beyond the class\'s rate over the last second (for an inner class: by its subtree)') : null,
      th('rate', '', 'configured rate'),
      tree ? th('ceil', '', 'the most the class may reach by borrowing') : null,
      tree ? th('prio', '', 'priority for spare (0 first); the tooltip gives the weight') : null,
      th('offered', '', 'received over the last second'), th('delay p50 / p99'), th('drops/s'),
      th('backlog'), th('flows'), th('ECN/s', '', 'packets marked CE per second'), th('keys'),
      th('global', '', 'global limit: this host\'s leased rate of the fleet\'s, hosts, lease state'), th('mode', 'mode'));
  }

  // hiddenByCollapse reports whether a row's class sits under a collapsed
  // inner class.
  function hiddenByCollapse(direction, row, parentOf) {
    for (let p = row.parent, n = 0; p && n < 9; p = parentOf.get(p), n++) {
      if (state.collapsed.has(key(direction, p))) return true;
    }
    return false;
  }

  // globalText is a global class's lease: "25 Mbit/s of 100 Mbit/s · 4 hosts",
  // with the state when it is not leased ("fallback share").
  function globalText(g) {
    const rate = g.open ? 'unlimited' : fmtRate(g.leased_bytes_per_second);
    let t = `${rate} of ${fmtRate(g.global_bytes_per_second)} · ${g.hosts} hosts`;
    if (g.state !== 'leased') t += ' · ' + g.state + (g.state === 'fallback' ? ' ' + g.on_unreachable : '');
    return t;
  }

  function modeText(m) {
    const parts = [m.mode];
    if (m.queue) parts.push(m.queue);
    if (m.capped) parts.push('capped');
    if (m.per_key) parts.push('per ' + m.per_key);
    if (m.wire) parts.push('wire rates');
    return parts.join(' · ');
  }

  // wireTitle says what a wire class's rates mean, for its rate cells.
  function wireTitle(m) {
    return m.wire ? `rates on the link (${m.wire}); achieved and offered are IP rates` : null;
  }

  function updateChart(v, c, charted) {
    const spec = c.spec;
    const series = [];
    for (const cls of charted) {
      for (const s of spec.series(cls)) {
        s.colour = colourOf(key(v.direction, cls.meta.class));
        series.push(s);
      }
    }
    c.series = series;
    if (series.length === 0) {
      if (c.u) {
        c.u.destroy();
        c.u = null;
        c.sig = '';
      }
      c.fig.hidden = !!spec.hideEmpty;
      c.plot.hidden = true;
      c.nodata.hidden = false;
      c.nodata.textContent = typeof spec.empty === 'function' ? spec.empty() : (spec.empty || 'No data');
      c.readout.replaceChildren();
      return;
    }
    c.fig.hidden = false;
    c.plot.hidden = false;
    c.nodata.hidden = true;
    const data = [state.times, ...series.map((s) => s.values)];
    const sig = series.map((s) => s.label + '|' + s.colour + '|' + (s.dash || []).join(',')).join(';');
    if (c.u && c.sig === sig) {
      c.u.setData(data);
    } else {
      if (c.u) c.u.destroy();
      c.sig = sig;
      c.u = new uPlot(chartOptions(v, c, series), data, c.plot);
    }
    updateReadout(v, c);
  }

  // ---- The autorate chart: a direction with rate: auto gets one, first
  // in its grid: the rate its controller set and the achieved rate it saw
  // (left axis), the link-wide delay delta and each reflector's (right
  // axis, ms). Absent for a fixed rate.

  const REFLECTOR_COLOURS = ['#2a9d48', '#e08a00', '#8451c7', '#0f9fb0', '#b5447c', '#7a5c3e'];

  function newAutorateChart() {
    const c = {u: null, sig: '', series: []};
    c.readout = el('div', {class: 'readout'});
    c.plot = el('div', {class: 'plot'});
    c.caption = el('span', {class: 'hint'});
    c.fig = el('figure', {class: 'chart', 'data-chart': 'autorate', hidden: true},
      el('figcaption', {}, el('span', {text: 'Autorate'}), c.caption), c.readout, c.plot);
    return c;
  }

  function updateAutorate(v, e) {
    const c = v.auto;
    if (!e) {
      if (c.u) c.u.destroy();
      c.u = null;
      c.sig = '';
      c.series = [];
      c.fig.hidden = true;
      return;
    }
    c.fig.hidden = false;
    const m = e.meta;
    c.caption.textContent = `${m.state} · ${fmtRateExact(m.min_bytes_per_second)}–${fmtRateExact(m.max_bytes_per_second)}, base ${fmtRateExact(m.base_bytes_per_second)}`;
    const series = [
      {label: 'rate', scale: 'rate', values: scale(e.series.rate, 8), colour: '#1f6fd1', width: 2, fmt: fmtBits},
      {label: 'achieved', scale: 'rate', values: scale(e.series.achieved, 8), colour: '#1f6fd1', width: 1, dash: [2, 2], fmt: fmtBits},
      {label: 'delta', scale: 'ms', values: scale(e.series.delta, 1e3), colour: '#d9412b', width: 1.5, fmt: (x) => fmtDelay(ok(x) ? x / 1e3 : x)},
    ];
    Object.keys(e.reflectors).forEach((addr, i) => {
      series.push({label: addr + ' delta', scale: 'ms', values: scale(e.reflectors[addr], 1e3),
        colour: REFLECTOR_COLOURS[i % REFLECTOR_COLOURS.length], width: 1, dash: [5, 3], fmt: (x) => fmtDelay(ok(x) ? x / 1e3 : x)});
    });
    c.series = series;
    const data = [state.times, ...series.map((s) => s.values)];
    const sig = series.map((s) => s.label).join(';');
    if (c.u && c.sig === sig) {
      c.u.setData(data);
    } else {
      if (c.u) c.u.destroy();
      c.sig = sig;
      const axis = {
        stroke: '#5b6474', font: '11px system-ui, sans-serif',
        grid: {stroke: '#edf0f3', width: 1}, ticks: {stroke: '#dfe3e8', width: 1, size: 4},
      };
      const range = (u, min, max) => [0, max > 0 ? max * 1.12 : 1];
      c.u = new uPlot({
        ...plotSize(c),
        legend: {show: false},
        cursor: {sync: {key: 'pacer-' + v.direction}, drag: {x: false, y: false}, points: {size: 5}},
        scales: {x: {time: true}, rate: {range}, ms: {range}},
        axes: [
          {...axis, space: 64, size: 30, values: (u, splits) => splits.map(fmtTime)},
          {...axis, scale: 'rate', size: 58, space: 28, values: (u, splits) => splits.map(fmtBitsAxis)},
          {...axis, scale: 'ms', side: 1, size: 50, space: 28, grid: {show: false}, values: (u, splits) => splits.map(fmtMsAxis)},
        ],
        series: [{}, ...series.map((s) => ({
          label: s.label, scale: s.scale, stroke: s.colour, width: s.width, dash: s.dash, points: {show: false}, spanGaps: false,
        }))],
        hooks: {setCursor: [() => autorateReadout(c)]},
      }, data, c.plot);
    }
    autorateReadout(c);
  }

  function autorateReadout(c) {
    const n = state.times.length;
    if (!n || !c.series.length) return;
    const hover = c.u && c.u.cursor.idx !== null && c.u.cursor.idx !== undefined;
    const i = hover ? c.u.cursor.idx : n - 1;
    c.readout.replaceChildren(el('span', {class: 'when', text: hover ? fmtTime(state.times[i]) : 'now'}),
      ...c.series.map((s) => el('span', {}, swatch(s.colour), el('span', {text: s.label}), el('b', {text: s.fmt(s.values[i])}))));
  }

  function chartOptions(v, c, series) {
    const axis = {
      stroke: '#5b6474', font: '11px system-ui, sans-serif',
      grid: {stroke: '#edf0f3', width: 1}, ticks: {stroke: '#dfe3e8', width: 1, size: 4},
    };
    return {
      ...plotSize(c),
      legend: {show: false},
      cursor: {sync: {key: 'pacer-' + v.direction}, drag: {x: false, y: false}, points: {size: 5}},
      scales: {x: {time: true}, y: {range: (u, min, max) => [0, max > 0 ? max * 1.12 : 1]}},
      axes: [
        {...axis, space: 64, size: 30, values: (u, splits) => splits.map(fmtTime)},
        {...axis, size: 58, space: 28, incrs: c.spec.incrs, values: (u, splits) => splits.map(c.spec.axis)},
      ],
      series: [{}, ...series.map((s) => ({
        label: s.label, stroke: s.colour, width: s.width, dash: s.dash, points: {show: false}, spanGaps: false,
      }))],
      hooks: {setCursor: [() => updateReadout(v, c)]},
    };
  }

  // updateReadout writes each charted class's figure at the cursor, or at
  // the newest sample: the first MAX_READOUT classes, then how many more
  // (the table has them all).
  function updateReadout(v, c) {
    const n = state.times.length;
    if (!n) return;
    const hover = c.u && c.u.cursor.idx !== null && c.u.cursor.idx !== undefined;
    const i = hover ? c.u.cursor.idx : n - 1;
    const seen = new Set();
    const parts = [el('span', {class: 'when', text: hover ? fmtTime(state.times[i]) : 'now'})];
    let more = 0;
    for (const s of c.series) {
      if (seen.has(s.cls)) continue;
      seen.add(s.cls);
      if (c.spec.readoutIf && !c.spec.readoutIf(s.cls)) continue;
      if (parts.length > MAX_READOUT) {
        more++;
        continue;
      }
      parts.push(el('span', {}, swatch(s.colour), el('span', {text: s.cls.meta.class}), el('b', {text: c.spec.readout(s.cls, i)})));
    }
    if (more) parts.push(el('span', {class: 'when', text: `+${more} more`}));
    c.readout.replaceChildren(...parts);
  }

  function updateTable(v, d, ordered) {
    const n = state.times.length;
    const tree = ordered.some((r) => r.c.meta.sharing);
    if (v.tree !== tree) {
      v.thead.replaceChildren(tableHead(tree));
      v.tree = tree;
    }
    const parentOf = new Map(ordered.map((r) => [r.c.meta.class, r.parent]));
    const rows = ordered.map((row) => {
      const c = row.c;
      const m = c.meta;
      const s = c.series;
      const i = n - 1;
      const cell = (field, text, extra) => el('td', {'data-field': field, text, ...extra});
      const drops = Object.entries(c.dropped).filter(([, a]) => ok(a[i]) && a[i] > 0);
      const dropTotal = drops.reduce((t, [, a]) => t + a[i], 0);
      const fq = m.queue === 'fq';
      const sent = s.sent_bytes_per_second[i];
      const sh = m.sharing;
      const k = key(d.direction, m.class);
      const collapsed = row.inner && state.collapsed.has(k);
      let name = [swatch(colourOf(k)), m.class];
      if (tree) {
        const toggle = row.inner ? el('button', {
          type: 'button', class: 'toggle', text: collapsed ? '▸' : '▾', 'data-toggle': m.class,
          title: collapsed ? 'show the classes under ' + m.class : 'hide the classes under ' + m.class,
          'aria-expanded': collapsed ? 'false' : 'true',
        }) : el('i', {class: 'toggle-space'});
        if (row.inner) {
          toggle.addEventListener('click', () => {
            if (state.collapsed.has(k)) state.collapsed.delete(k);
            else state.collapsed.add(k);
            updateTable(v, v.d, v.rows);
          });
        }
        name = [toggle, ...name];
      }
      const borrowed = sh && s.borrowed_bytes_per_second ? s.borrowed_bytes_per_second[i] : null;
      return el('tr', {
        'data-direction': d.direction, 'data-class': m.class,
        'data-parent': tree ? row.parent : null, 'data-depth': tree ? row.depth : null,
        'data-inner': row.inner ? (collapsed ? 'collapsed' : 'expanded') : null,
        hidden: tree && hiddenByCollapse(d.direction, row, parentOf),
      },
        el('td', {class: 'name' + (row.depth > 0 ? ' child' : ''), depth: row.depth}, ...name),
        cell('achieved', fmtRate(sent), {
          'data-value': ok(sent) ? sent : '',
          'data-from': i > 0 ? state.times[i - 1] : '', 'data-to': state.times[i],
          title: i > 0 ? `${fmtTime(state.times[i - 1])} – ${fmtTime(state.times[i])}` : null,
        }),
        tree ? cell('borrowed', sh ? fmtRate(borrowed) : DASH, {
          'data-value': ok(borrowed) ? borrowed : '',
          class: sh && ok(borrowed) && borrowed > 0 ? '' : 'dim',
        }) : null,
        cell('rate', m.rate_bytes_per_second > 0 ? fmtRateExact(m.rate_bytes_per_second) +
          (m.peak_bytes_per_second > 0 ? ' peak ' + fmtRateExact(m.peak_bytes_per_second) : '') +
          (m.wire ? ' (wire)' : '') : DASH,
        {'data-value': m.rate_bytes_per_second, 'data-wire': m.wire || null, title: wireTitle(m)}),
        tree ? cell('ceil', sh ? fmtRateExact(sh.ceil_bytes_per_second) : DASH, {
          'data-value': sh ? sh.ceil_bytes_per_second : '',
          class: sh && sh.ceil_bytes_per_second > m.rate_bytes_per_second ? '' : 'dim',
          title: sh && sh.ceil_bytes_per_second <= m.rate_bytes_per_second ? 'ceil = rate: does not borrow' : null,
        }) : null,
        tree ? cell('prio', sh ? String(sh.priority) : DASH, {
          'data-value': sh ? sh.priority : '', class: sh ? '' : 'dim',
          title: sh ? 'priority ' + sh.priority + ' · weight ' + sh.weight : null,
        }) : null,
        cell('offered', fmtRate(s.received_bytes_per_second[i])),
        cell('delay', fmtDelay(s.delay_p50_seconds[i]) + ' / ' + fmtDelay(s.delay_p99_seconds[i])),
        cell('drops', dropTotal > 0 ? fmtCount(dropTotal) : '0', {
          class: dropTotal > 0 ? '' : 'dim',
          title: drops.map(([r, a]) => r + ' ' + fmtCount(a[i])).join(', ') || null,
        }),
        cell('backlog', m.mode === 'shape' ? fmtBytes(s.backlog_bytes[i]) + ' · ' + fmtCount(m.backlog_packets) + ' pkt' : DASH,
          {class: m.mode === 'shape' ? '' : 'dim'}),
        cell('flows', fq ? fmtCount(s.active_flows[i]) : DASH, {class: fq ? '' : 'dim'}),
        cell('marks', fq ? fmtCount(s.marked_per_second[i]) : DASH, {class: fq ? '' : 'dim'}),
        cell('keys', m.per_key ? fmtCount(last(s.keys)) : DASH, {class: m.per_key ? '' : 'dim'}),
        cell('global', m.global ? globalText(m.global) : DASH, {
          class: m.global ? (m.global.state === 'leased' ? '' : 'warn') : 'dim',
          title: m.global ? `key ${m.global.key} · fleet demand ${fmtRate(m.global.fleet_demand_bytes_per_second)} · ` +
            `lease age ${m.global.lease_age_seconds.toFixed(1)} s · ${m.global.failures} failed refreshes · on_unreachable ${m.global.on_unreachable}` : null,
        }),
        cell('mode', (row.inner ? 'inner · ' : '') + modeText(m), {class: 'mode'}),
      );
    });
    v.tbody.replaceChildren(...rows);
  }

  function updateKeys(v, d, classes) {
    const boxes = [];
    for (const c of classes) {
      const m = c.meta;
      if (!m.per_key) continue;
      const keys = m.top_keys || [];
      const rows = keys.map((k) => el('tr', {},
        el('td', {text: k.key}), el('td', {text: fmtRate(k.rate_bytes_per_second)}),
        el('td', {text: fmtRateExact(k.rate_limit_bytes_per_second)}), el('td', {text: fmtBytes(k.queued_bytes)}),
        el('td', {text: fmtCount(k.dropped)})));
      if (!rows.length) rows.push(el('tr', {}, el('td', {class: 'dim', text: 'no keys yet', colSpan: 5})));
      const th = (t) => el('th', {scope: 'col', text: t});
      boxes.push(el('div', {class: 'keybox', 'data-class': m.class},
        el('h3', {}, swatch(colourOf(key(d.direction, m.class))), el('span', {text: `Busiest keys of ${m.class}`}),
          el('span', {class: 'sub', text: `per ${m.per_key} · ${fmtCount(m.keys_total || 0)} tracked`})),
        el('table', {}, el('thead', {}, el('tr', {}, th('key'), th('rate'), th('limit'), th('queued'), th('dropped'))),
          el('tbody', {}, ...rows))));
    }
    v.keys.replaceChildren(...boxes);
  }

  // ---- Rendering and polling.

  const dirsEl = document.getElementById('directions');
  const statusEl = document.getElementById('status');
  const bannerEl = document.getElementById('banner');
  const versionEl = document.getElementById('version');
  const scenarioEl = document.getElementById('scenario');

  // scenarioText says where a running scenario stands, as pacerctl status
  // does: "scenario: step 2/3 tunnel, 1.2s ago, loop 1".
  function scenarioText(s) {
    if (s.step === 0) return `scenario: ${s.steps} steps, before the first`;
    let t = `scenario: step ${s.step}/${s.steps}`;
    if (s.label && s.label !== `step ${s.step}`) t += ` ${s.label}`;
    t += `, ${s.since_seconds.toFixed(1)}s ago`;
    if (s.loop > 0) t += `, loop ${s.loop}`;
    if (s.done) t += ', done';
    if (s.error) t += ` (failed: ${s.error})`;
    return t;
  }
  const emptyEl = document.getElementById('empty');

  function render() {
    const n = state.times.length;
    document.body.dataset.state = 'live';
    statusEl.textContent = n ? 'live · ' + fmtTime(state.times[n - 1]) : 'live · waiting for the first sample';
    if (!state.dirs.length) {
      bannerEl.textContent = n ? 'pacerd’s link is not up yet.' : 'Waiting for pacerd’s first sample…';
      bannerEl.hidden = false;
    } else {
      bannerEl.hidden = true;
    }
    const configured = [...state.classes.values()].some((c) => c.meta.class !== 'unclassified');
    emptyEl.hidden = configured || !state.dirs.length;

    const want = new Set(state.dirs.map((d) => d.direction));
    for (const [dir, v] of state.views) {
      if (!want.has(dir)) {
        for (const c of v.charts.values()) if (c.u) c.u.destroy();
        if (v.auto.u) v.auto.u.destroy();
        v.ro.disconnect();
        v.section.remove();
        state.views.delete(dir);
        state.charted.delete(dir);
      }
    }
    for (const d of state.dirs) {
      let v = state.views.get(d.direction);
      if (!v) {
        v = newView(d.direction);
        state.views.set(d.direction, v);
      }
      dirsEl.append(v.section); // keeps the answer's order
      updateView(v, d);
    }
  }

  async function poll() {
    let wait = 1000;
    try {
      const url = 'api/v1/history' + (state.last !== null ? '?after=' + state.last : '');
      const r = await fetch(url, {cache: 'no-store'});
      if (!r.ok) throw new Error(`${r.status} ${r.statusText}`);
      const resp = await r.json();
      if (state.started !== null && resp.started !== state.started && resp.first !== 1) {
        // pacerd restarted: our "after" meant nothing to it; ask for all.
        state.last = null;
        setTimeout(poll, 0);
        return;
      }
      merge(resp);
      if (resp.version) versionEl.textContent = resp.version;
      scenarioEl.hidden = !resp.scenario;
      if (resp.scenario) {
        scenarioEl.textContent = scenarioText(resp.scenario);
        scenarioEl.classList.toggle('failed', !!resp.scenario.error);
      }
      render();
      // Ask again just after the next sample.
      wait = resp.next_sample_in_seconds > 0 ? resp.next_sample_in_seconds * 1000 + 120 : 250;
    } catch (err) {
      document.body.dataset.state = 'error';
      statusEl.textContent = 'no answer from pacerd (' + err.message + '); retrying';
      wait = 2000;
    }
    setTimeout(poll, Math.min(Math.max(wait, 100), 2000));
  }

  // pacerDashboard lets tests (and the curious, from the console) read
  // what the page draws.
  window.pacerDashboard = {
    // series returns, per direction and chart, the labels of the series
    // drawn.
    series() {
      const out = {};
      for (const [dir, v] of state.views) {
        out[dir] = {};
        for (const [id, c] of v.charts) out[dir][id] = c.u ? c.series.map((s) => s.label) : [];
        if (v.auto.u) out[dir].autorate = v.auto.series.map((s) => s.label);
      }
      return out;
    },
    // lastValues returns, per direction and chart, each series' value at
    // the newest sample, in the chart's units (bit/s, ms, 1/s, bytes).
    lastValues() {
      const out = {};
      for (const [dir, v] of state.views) {
        out[dir] = {};
        for (const [id, c] of v.charts) {
          out[dir][id] = {};
          for (const s of c.series) out[dir][id][s.label] = last(s.values);
        }
        if (v.auto.u) {
          out[dir].autorate = {};
          for (const s of v.auto.series) out[dir].autorate[s.label] = last(s.values);
        }
      }
      return out;
    },
    // tree returns, per direction, the table's rows in their order:
    // {class, parent, depth, inner, hidden} (parent and depth only in a
    // class tree).
    tree() {
      const out = {};
      for (const [dir, v] of state.views) {
        out[dir] = [...v.tbody.querySelectorAll('tr[data-class]')].map((tr) => ({
          class: tr.dataset.class, parent: tr.dataset.parent ?? null,
          depth: tr.dataset.depth === undefined ? null : +tr.dataset.depth,
          inner: tr.dataset.inner ?? null, hidden: tr.hidden,
        }));
      }
      return out;
    },
    // colours returns each class's colour, by "direction/class".
    colours() {
      const out = {};
      for (const [k, c] of state.colours) out[k.replace('\u0000', '/')] = c;
      return out;
    },
    last: () => state.last,
  };

  poll();
})();
