// memtool report: draws the charts from the JSON embedded in the page.
// No libraries and no network: everything here is inline. Profile text is only
// ever put into the page with textContent / setAttribute, never as HTML.
(function () {
  'use strict';
  var statusEl = document.getElementById('memtool-status');
  var errors = [];
  var drawn = 0;
  function setStatus() {
    var ok = errors.length === 0;
    document.documentElement.setAttribute('data-memtool', ok ? 'ready' : 'error');
    document.documentElement.setAttribute('data-memtool-charts', String(drawn));
    if (statusEl) {
      statusEl.className = ok ? 'ready' : 'error';
      statusEl.hidden = ok;
      statusEl.textContent = ok ? 'memtool-js: ready (' + drawn + ' charts)' : 'memtool-js: error: ' + errors.join('; ');
    }
  }
  window.addEventListener('error', function (e) { errors.push(String(e.message)); setStatus(); });

  var SVGNS = 'http://www.w3.org/2000/svg';
  // ---------------------------------------------------------------------------
// Landmarks (summary's landmarks[]): a tick on the axis at each, the floor a
// dotted line, and their names in rows under the axis, each in the first row
// where it overlaps no other (starting at its tick, else ending there), else
// left out; the tick keeps the whole label as its title. render/marks.rs's
// label_rows lays out the SVG's the same way.
var LANDMARK_ROWS = 4, LANDMARK_ROW = 12;
// The least room between two step lines drawn on a timeline, in px.
var STEP_GAP = 8;
function layOutLabels(labels, rows, gap, lo, hi) {
  var taken = [];
  for (var r = 0; r < rows; r++) { taken.push([]); }
  return labels.map(function (l) {
    var fit = function (left) { return Math.max(lo, Math.min(hi - l.w, left)); };
    for (var row = 0; row < rows; row++) {
      var cands = [fit(l.x), fit(l.x - l.w)];
      for (var c = 0; c < cands.length; c++) {
        var left = cands[c];
        var clear = taken[row].every(function (p) { return left + l.w + gap <= p[0] || p[1] + gap <= left; });
        if (clear) { taken[row].push([left, left + l.w]); return { row: row, x: left }; }
      }
    }
    return null;
  });
}
function drawLandmarks(svg, g, marks, sx, sy, d0, d1, box) {
  // A landmark at the recording's start is before the first column.
  var shown = marks.filter(function (l) { return l.at <= d1 && (l.at >= d0 || d0 <= box.start); });
  var plotBottom = box.bottom - 20;
  var labels = shown.map(function (l) { return { x: Math.max(box.L, sx(l.at)), w: 5.6 * l.text.length }; });
  var places = layOutLabels(labels, LANDMARK_ROWS, 6, box.L, box.W - box.R);
  shown.forEach(function (l, k) {
    var x = Math.max(box.L, sx(l.at));
    if (l.kind === 'floor') {
      var fl = svgEl('line', { x1: box.L, x2: box.W - box.R, y1: Math.max(box.T, sy(l.bytes)), y2: Math.max(box.T, sy(l.bytes)), 'class': 'floor' });
      fl.appendChild(svgEl('title', {}, l.title));
      g.appendChild(fl);
    }
    var tick = svgEl('line', { x1: x, x2: x, y1: plotBottom - 6, y2: plotBottom, 'class': 'landmarktick' });
    tick.appendChild(svgEl('title', {}, l.title));
    svg.appendChild(tick);
    var at = places[k];
    if (!at) { return; }
    var text = svgEl('text', { x: at.x, y: box.bottom + at.row * LANDMARK_ROW + 8, 'class': 'landmark' }, l.text);
    text.appendChild(svgEl('title', {}, l.title));
    svg.appendChild(text);
  });
}

// Where a timeline opens: when it begins with a flat stretch (no column
// more than 1 % of its range away from the stretch's first) longer than half
// of it, a little before the stretch ends (a twentieth of what follows),
// else null (the whole of it).
function activityDomain(t, full) {
  var n = t.x.length;
  if (n < 3) { return null; }
  var top = -Infinity, bottom = Infinity;
  for (var i = 0; i < n; i++) { top = Math.max(top, t.hi[i]); bottom = Math.min(bottom, t.lo[i]); }
  var tol = (top - bottom) / 100;
  // A flat column is one whose highest and lowest totals agree: a busy run
  // whose every column reaches the same top is not flat (zooming to its end
  // would hide its peak).
  var flat = function (i) {
    return t.hi[i] - t.lo[i] <= tol && Math.abs(t.hi[i] - t.hi[0]) <= tol && Math.abs(t.lo[i] - t.lo[0]) <= tol;
  };
  if (!flat(0)) { return null; }
  var k = 1;
  while (k < n && flat(k)) { k++; }
  if (k >= n) { return null; }
  var first = t.x[k - 1];
  if (first - full[0] <= 0.5 * (full[1] - full[0])) { return null; }
  return [Math.max(full[0], first - (full[1] - first) / 20), full[1]];
}

function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) { if (Object.prototype.hasOwnProperty.call(attrs, k)) { e.setAttribute(k, String(attrs[k])); } }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function htmlEl(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  function fmtBytes(b) {
    var neg = b < 0; b = Math.abs(b);
    if (b < 1024) { return (neg ? '-' : '') + b + ' B'; }
    var u = 0;
    while (b >= 1024 && u < UNITS.length - 1) { b /= 1024; u++; }
    return (neg ? '-' : '') + b.toFixed(2) + ' ' + UNITS[u];
  }
  function fnv(s) {
    var h = 0x811c9dc5;
    for (var i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
    return h >>> 0;
  }
  function fmtX(m, x, col) {
    switch (m.axis) {
      case 'time_ps': return 't+' + fmtSeconds((x - (m.t0 || 0)) / 1e12);
      case 'time_us': return 't+' + fmtSeconds((x - (m.t0 || 0)) / 1e6);
      case 'snapshot':
        if (m.labels && col !== undefined && m.labels[col] !== undefined) { return m.labels[col]; }
        return '#' + Math.round(x + m.timeline.x0);
      default: return '#' + Math.round(x + m.timeline.x0);
    }
  }
  // As the facts print times: two decimals, trailing zeros dropped.
  function fmtSeconds(s) {
    var a = Math.abs(s);
    function fixed(v, d, u) { return v.toFixed(d).replace(/\.?0+$/, '') + ' ' + u; }
    if (a === 0) { return '0 s'; }
    if (a < 1e-6) { return fixed(s * 1e9, 2, 'ns'); }
    if (a < 1e-3) { return fixed(s * 1e6, 2, 'µs'); }
    if (a < 1) { return fixed(s * 1e3, 2, 'ms'); }
    return fixed(s, 3, 's');
  }
  function niceStep(range, ticks) {
    var raw = range / Math.max(1, ticks);
    var p = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (raw <= steps[i] * p) { return steps[i] * p; } }
    return 10 * p;
  }
  function byteStep(max) {
    // Steps at powers of two of a binary unit read better for memory.
    var unit = 1; while (max / unit >= 1024 && unit < Math.pow(1024, 5)) { unit *= 1024; }
    // No fractional bytes: a step is a whole byte at least.
    return Math.max(1, niceStep(max / unit, 4) * unit);
  }
  function lowerBound(arr, v) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid] < v) { lo = mid + 1; } else { hi = mid; } }
    return lo;
  }
  function tooltip(container) {
    var tip = htmlEl('div', 'tooltip'); tip.hidden = true; container.appendChild(tip);
    return {
      show: function (lines, ev) {
        while (tip.firstChild) { tip.removeChild(tip.firstChild); }
        lines.forEach(function (l, i) {
          var d = htmlEl('div', null, l);
          if (i === 0) { d.style.fontWeight = '600'; }
          tip.appendChild(d);
        });
        tip.hidden = false;
        var r = container.getBoundingClientRect();
        var x = ev.clientX - r.left + 14, y = ev.clientY - r.top + 14;
        if (x + tip.offsetWidth > r.width) { x = Math.max(0, ev.clientX - r.left - tip.offsetWidth - 14); }
        tip.style.left = x + 'px'; tip.style.top = y + 'px';
      },
      hide: function () { tip.hidden = true; }
    };
  }
  function svgPoint(svg, ev, W) {
    var r = svg.getBoundingClientRect();
    return { x: (ev.clientX - r.left) * W / r.width, y: (ev.clientY - r.top) * W / r.width };
  }

  // ---- memory timeline: stacked areas by group --------------------------
  function timeline(container, m) {
    // The static picture is for viewers without a script.
    var still = container.querySelector('.static');
    if (still) { container.removeChild(still); }
    var t = m.timeline, n = t.x.length;
    if (n === 0) { return; }
    container.classList.add('chart');
    var W = 1000, H = 300, L = 70, R = 14, T = 16, B = 28;
    // Rows of landmark labels under the axis (landmarks: drawLandmarks).
    var laneRows = (m.landmarks && m.landmarks.length) ? LANDMARK_ROWS : 0;
    H += laneRows * LANDMARK_ROW; B += laneRows * LANDMARK_ROW;
    // Each column holds until the next one; the last holds for one average
    // column, so a final snapshot (often the peak) has a width like the others.
    var lastW = n > 1 ? (t.x[n - 1] - t.x[0]) / (n - 1) : 1;
    var full = n === 1 ? [t.x[0] - 0.5, t.x[0] + 0.5] : [t.x[0], t.x[n - 1] + lastW];
    if (full[0] === full[1]) { full = [full[0] - 1, full[1] + 1]; }
    var domain = full.slice(), yDomain = null;
    // A timeline flat for more than half its length before anything changes
    // opens where the activity is (saying so); reset zoom shows it all.
    var opening = activityDomain(t, full);
    if (opening) { domain = opening.slice(); }
    // Memory allocated before the recording lies at the bottom; it can be
    // hidden, and the axis then starts at the least of it in view.
    var order = [], preCount = 0;
    t.bands.forEach(function (b, k) { if (b.pre) { order.push(k); preCount++; } });
    t.bands.forEach(function (b, k) { if (!b.pre) { order.push(k); } });
    var hidePre = false;
    var preTotal = new Array(n).fill(0);
    t.bands.forEach(function (b) { if (b.pre) { for (var i = 0; i < n; i++) { preTotal[i] += b.v[i]; } } });
    var svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'memory timeline' });
    var bar = htmlEl('div', 'hint');
    var reset = htmlEl('button', 'reset', 'reset zoom'); reset.type = 'button'; reset.hidden = true;
    bar.appendChild(reset);
    var zoomNote = null;
    if (opening) {
      zoomNote = htmlEl('span', 'zoomnote', 'Zoomed to the activity, from ' + fmtX(m, opening[0]) + ': before it, what is in use stays flat (reset zoom shows all). ');
      bar.insertBefore(zoomNote, reset);
    }
    container.appendChild(svg);
    container.appendChild(bar);
    var legend = htmlEl('div', 'legend'); container.appendChild(legend);
    var drill = htmlEl('div', 'drill'); container.appendChild(drill);
    var tip = tooltip(container);
    // The legend counts what the rows ("Live at peak") list: the column
    // holding the page's peak — the tallest, unless the allocator's own
    // figure put the peak at another moment than the replay's highest.
    var peakCol = t.hi.indexOf(Math.max.apply(null, t.hi));
    if (t.x[peakCol] !== m.peak.x || t.hi[peakCol] !== m.peak.bytes) {
      for (var pc = 0; pc < t.x.length && t.x[pc] <= m.peak.x; pc++) { peakCol = pc; if (t.hi[pc] === m.peak.bytes && t.x[pc] === m.peak.x) { break; } }
    }
    order.forEach(function (k) {
      var b = t.bands[k];
      var item = htmlEl('span', 'item'); item.title = b.key;
      var sw = htmlEl('span', 'swatch'); sw.style.background = b.color; item.appendChild(sw);
      // A band is drawn for its largest over the recording: one with
      // nothing live at the peak says how high it went instead of "0 B".
      var atPeak = b.v[peakCol] || 0;
      var said = atPeak > 0 ? fmtBytes(atPeak) + ' at peak'
        : 'none at peak (highest ' + fmtBytes(b.v.reduce(function (a, v) { return v > a ? v : a; }, 0)) + ')';
      item.appendChild(document.createTextNode((b.short || b.key) + ' — ' + said));
      legend.appendChild(item);
    });
    if (preCount > 0) {
      var lab = htmlEl('label', 'item pre');
      var box = htmlEl('input'); box.type = 'checkbox'; box.className = 'hidepre';
      lab.appendChild(box);
      lab.appendChild(document.createTextNode(' hide memory allocated before the recording (' + fmtBytes(preTotal[peakCol]) + ' at peak) and start the axis at it'));
      box.addEventListener('change', function () { hidePre = box.checked; yDomain = null; draw(); });
      legend.appendChild(lab);
    }
    // The phase strip's colours, each phase once.
    var phaseSeen = {};
    (m.phases || []).forEach(function (ph) {
      if (phaseSeen[ph.phase]) { return; }
      phaseSeen[ph.phase] = true;
      var item = htmlEl('span', 'item');
      var sw = htmlEl('span', 'swatch phase'); sw.style.background = ph.color;
      item.appendChild(sw); item.appendChild(document.createTextNode(' ' + ph.phase + ' (phase strip)'));
      legend.appendChild(item);
    });
    var capLegend = null;
    if (m.capacity) { capLegend = htmlEl('span', 'item', 'capacity ' + fmtBytes(m.capacity) + ' (dashed)'); legend.appendChild(capLegend); }
    var reservedLegend = null;
    if (m.reserved && m.reserved.length) {
      reservedLegend = htmlEl('span', 'item', 'allocator reserved (line)');
      legend.appendChild(reservedLegend);
    }
    var sx, sy, yLo, yHi, vis;
    function draw() {
      while (svg.firstChild) { svg.removeChild(svg.firstChild); }
      var d0 = domain[0], d1 = domain[1];
      var i0 = Math.max(0, lowerBound(t.x, d0) - 1), i1 = Math.min(n - 1, lowerBound(t.x, d1));
      vis = [i0, i1];
      var top = 0, base = Infinity;
      for (var i = i0; i <= i1; i++) { top = Math.max(top, t.hi[i]); base = Math.min(base, preTotal[i]); }
      if (!hidePre || preCount === 0) { base = 0; }
      // The byte axis fits what is in use; the allocator's reserved memory
      // is a line that may run off the top, its value said there.
      var reservedTop = 0;
      (m.reserved || []).forEach(function (r) { if (r[0] >= d0 && r[0] <= d1) { reservedTop = Math.max(reservedTop, r[1]); } });
      var capOnScale = m.capacity && m.capacity <= Math.max(top, 1) * 1.5;
      if (capOnScale) { top = Math.max(top, m.capacity); }
      if (capLegend) { capLegend.hidden = !capOnScale; }
      var step;
      if (yDomain) {
        yLo = yDomain[0]; yHi = yDomain[1]; step = byteStep(yHi - yLo);
      } else {
        step = byteStep(Math.max(top - base, 1));
        yLo = Math.floor(base / step) * step;
        // Headroom fitted to the peak: a few percent, not a whole step.
        yHi = Math.max(yLo + step, top + (top - yLo) * 0.04);
      }
      sx = function (x) { return L + (x - d0) / (d1 - d0) * (W - L - R); };
      sy = function (b) { return T + (1 - (b - yLo) / (yHi - yLo)) * (H - T - B); };
      for (var y = Math.ceil(yLo / step) * step; y <= yHi + 1e-9; y += step) {
        svg.appendChild(svgEl('line', { x1: L, x2: W - R, y1: sy(y), y2: sy(y), 'class': 'gridline' }));
        svg.appendChild(svgEl('text', { x: L - 6, y: sy(y) + 4, 'text-anchor': 'end' }, fmtBytes(y)));
      }
      var timeAxis = m.axis === 'time_ps' || m.axis === 'time_us';
      var xs = niceStep(d1 - d0, 6);
      // Snapshots, events and program steps are whole numbers.
      if (!timeAxis) { xs = Math.max(1, Math.round(xs)); }
      var ticks = [];
      if (n === 1) { ticks = [t.x[0]]; } else {
        // Time ticks fall on round times since the start of the recording.
        var off = timeAxis ? (m.t0 || 0) : 0;
        for (var xt = Math.ceil((d0 - off) / xs) * xs + off; xt <= d1 + 1e-9; xt += xs) { ticks.push(xt); }
      }
      ticks.forEach(function (xt) {
        var col = lowerBound(t.x, xt), tx = sx(xt);
        var anchor = tx > W - R - 40 ? 'end' : tx < L + 40 ? 'start' : 'middle';
        svg.appendChild(svgEl('line', { x1: tx, x2: tx, y1: H - B, y2: H - B + 4, 'class': 'axis' }));
        svg.appendChild(svgEl('text', { x: tx, y: H - B + 16, 'text-anchor': anchor }, fmtX(m, xt, t.x[col] === xt ? col : undefined)));
      });
      svg.appendChild(svgEl('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, 'class': 'axis' }));
      var clipId = 'clip-' + m.dom;
      var defs = svgEl('defs', {}); var clip = svgEl('clipPath', { id: clipId });
      clip.appendChild(svgEl('rect', { x: L, y: 0, width: W - L - R, height: H - B })); defs.appendChild(clip); svg.appendChild(defs);
      var g = svgEl('g', { 'clip-path': 'url(#' + clipId + ')' }); svg.appendChild(g);
      var cum = new Array(n).fill(0);
      var xsOf = function (i) { return n === 1 ? null : sx(t.x[i]); };
      order.forEach(function (k) {
        var b = t.bands[k], d = '';
        if (n === 1) {
          d = 'M' + sx(full[0]) + ',' + sy(cum[0] + b.v[0]) + 'H' + sx(full[1]) + 'V' + sy(cum[0]) + 'H' + sx(full[0]) + 'Z';
          cum[0] += b.v[0];
        } else {
          // Memory holds its value until the next event: steps, not slopes.
          var upper = [], lower = [];
          for (var i = i0; i <= i1; i++) {
            var xa = xsOf(i).toFixed(1), xb = sx(i < n - 1 ? t.x[i + 1] : t.x[n - 1] + lastW).toFixed(1);
            var yl = sy(cum[i]).toFixed(1);
            lower.push(xa + ',' + yl, xb + ',' + yl);
            cum[i] += b.v[i];
            var yu = sy(cum[i]).toFixed(1);
            upper.push(xa + ',' + yu, xb + ',' + yu);
          }
          d = 'M' + upper.join('L') + 'L' + lower.reverse().join('L') + 'Z';
        }
        if (b.pre && hidePre) { return; }
        var p = svgEl('path', { d: d, fill: b.color, 'fill-opacity': 0.88, stroke: b.color, 'stroke-width': 0.6 });
        if (b.pre) { p.setAttribute('class', 'pre'); }
        p.appendChild(svgEl('title', {}, b.key));
        g.appendChild(p);
      });
      var dips = false;
      for (var k = i0; k <= i1; k++) { if (t.lo[k] < t.hi[k]) { dips = true; break; } }
      if (dips && n > 1) {
        var pts = [];
        for (var j = i0; j <= i1; j++) {
          var ly = sy(t.lo[j]).toFixed(1);
          pts.push(xsOf(j).toFixed(1) + ',' + ly, sx(j < n - 1 ? t.x[j + 1] : t.x[n - 1] + lastW).toFixed(1) + ',' + ly);
        }
        g.appendChild(svgEl('polyline', { points: pts.join(' '), 'class': 'lo' }));
      }
      if (m.reserved && m.reserved.length) {
        var rp = m.reserved.map(function (r) { return sx(r[0]).toFixed(1) + ',' + sy(r[1]).toFixed(1); });
        g.appendChild(svgEl('polyline', { points: rp.join(' '), 'class': 'reserved' }));
        if (reservedLegend) {
          reservedLegend.textContent = 'allocator reserved (line)' + (reservedTop > yHi ? ': up to ' + fmtBytes(reservedTop) + ', above the axis' : '');
        }
      }
      if (capOnScale) {
        g.appendChild(svgEl('line', { x1: L, x2: W - R, y1: sy(m.capacity), y2: sy(m.capacity), 'class': 'capacity' }));
      }
      // Step boundaries; labels only where there is room for them.
      var steps = (m.steps || []).filter(function (st) { return st.x >= d0 && st.x <= d1; });
      // A label starts past the end of the one before it (10px text: at
      // most 6.2px a character), whatever the step numbers' length. Lines
      // closer than STEP_GAP px to the last one drawn are left out: thousands
      // of dashed lines a pixel apart read as stripes across the bands.
      var labelEnd = -Infinity, lineAt = -Infinity;
      steps.forEach(function (st) {
        var x = sx(st.x);
        var labelled = x + 3 > labelEnd + 8;
        if (labelled || x >= lineAt + STEP_GAP) {
          g.appendChild(svgEl('line', { x1: x, x2: x, y1: T, y2: H - B, 'class': 'step' }));
          lineAt = x;
        }
        if (labelled) {
          svg.appendChild(svgEl('text', { x: x + 3, y: T + 8, 'class': 'steplabel' }, st.label));
          labelEnd = x + 3 + 6.2 * st.label.length;
        }
      });
      // Training phases: a strip along the top, named where there is room.
      (m.phases || []).forEach(function (ph) {
        if (ph.end < d0 || ph.start > d1) { return; }
        var a = sx(Math.max(ph.start, d0)), b = Math.max(a + 1, sx(Math.min(ph.end, d1)));
        var r = svgEl('rect', { x: a, y: T - 6, width: b - a, height: 5, fill: ph.color, 'class': 'phase' });
        r.appendChild(svgEl('title', {}, ph.phase));
        svg.appendChild(r);
        if (b - a > 5.4 * ph.phase.length + 4) {
          svg.appendChild(svgEl('text', { x: a, y: T - 8, 'class': 'phaselabel' }, ph.phase));
        }
      });
      var px = n === 1 ? sx(t.x[0]) : sx(m.peak.x);
      if (px >= L && px <= W - R && m.peak.bytes <= yHi) {
        g.appendChild(svgEl('line', { x1: px, x2: px, y1: sy(m.peak.bytes), y2: H - B, 'class': 'peak' }));
        g.appendChild(svgEl('circle', { cx: px, cy: sy(m.peak.bytes), r: 3.5, fill: 'none', 'class': 'peak' }));
        var right = px > W * 0.75;
        // Under the step labels, which it would cross.
        var peakTop = T + (steps.length ? 22 : 10);
        svg.appendChild(svgEl('text', { x: px + (right ? -6 : 6), y: Math.max(peakTop, sy(m.peak.bytes) - 6), 'class': 'peaklabel', 'text-anchor': right ? 'end' : 'start' }, 'peak ' + m.peak.text + ' at ' + m.peak.label));
      }
      drawLandmarks(svg, g, m.landmarks || [], sx, sy, d0, d1, { L: L, R: R, W: W, T: T, bottom: H - B + 20, start: full[0] });
      cursor = svgEl('line', { x1: 0, x2: 0, y1: T, y2: H - B, 'class': 'cursor', visibility: 'hidden' }); svg.appendChild(cursor);
      sel = svgEl('rect', { x: 0, y: T, width: 0, height: H - T - B, 'class': 'selection', visibility: 'hidden' }); svg.appendChild(sel);
      reset.hidden = domain[0] === full[0] && domain[1] === full[1] && yDomain === null;
      if (zoomNote) { zoomNote.hidden = !(domain[0] === opening[0] && domain[1] === opening[1] && yDomain === null); }
    }
    var cursor, sel, dragFrom = null;
    function invX(px) { return domain[0] + (px - L) / (W - L - R) * (domain[1] - domain[0]); }
    function invY(py) { return yLo + (1 - (py - T) / (H - T - B)) * (yHi - yLo); }
    // The column whose step covers x: the last one starting at or before it.
    function nearest(x) {
      var i = lowerBound(t.x, x);
      if (i < n && t.x[i] === x) { return i; }
      return Math.max(0, Math.min(n - 1, i - 1));
    }
    // The band drawn under height `value` in column i.
    function bandAt(i, value) {
      var acc = 0;
      for (var k = 0; k < order.length; k++) {
        var b = t.bands[order[k]];
        acc += b.v[i];
        if (value <= acc && b.v[i] > 0 && !(b.pre && hidePre)) { return order[k]; }
      }
      return -1;
    }
    svg.addEventListener('mousemove', function (ev) {
      var p = svgPoint(svg, ev, W);
      if (dragFrom !== null) {
        var a = Math.max(L, Math.min(dragFrom.x, p.x)), b = Math.min(W - R, Math.max(dragFrom.x, p.x));
        var ya = Math.max(T, Math.min(dragFrom.y, p.y)), yb = Math.min(H - B, Math.max(dragFrom.y, p.y));
        var tall = yb - ya > 20;
        if (b - a < 5 && tall) { a = L; b = W - R; }
        if (!tall) { ya = T; yb = H - B; }
        sel.setAttribute('x', a); sel.setAttribute('width', b - a);
        sel.setAttribute('y', ya); sel.setAttribute('height', yb - ya); sel.setAttribute('visibility', 'visible');
      }
      if (p.x < L || p.x > W - R) { tip.hide(); cursor.setAttribute('visibility', 'hidden'); return; }
      var i = nearest(invX(p.x));
      var cx = n === 1 ? p.x : sx(t.x[i]);
      cursor.setAttribute('x1', cx); cursor.setAttribute('x2', cx); cursor.setAttribute('visibility', 'visible');
      var under = bandAt(i, invY(p.y));
      var lines = [fmtX(m, t.x[i], i), 'total ' + fmtBytes(t.hi[i]) + (t.lo[i] < t.hi[i] ? ' (lowest in this column ' + fmtBytes(t.lo[i]) + ')' : '')];
      if (under >= 0) { lines.push(t.bands[under].key + ': ' + fmtBytes(t.bands[under].v[i])); }
      if (under >= 0 && m.blocks) { lines.push('click: the blocks of this group live here'); }
      tip.show(lines, ev);
    });
    svg.addEventListener('mouseleave', function () { tip.hide(); cursor.setAttribute('visibility', 'hidden'); dragFrom = null; sel.setAttribute('visibility', 'hidden'); });
    svg.addEventListener('mousedown', function (ev) { ev.preventDefault(); dragFrom = svgPoint(svg, ev, W); });
    svg.addEventListener('mouseup', function (ev) {
      if (dragFrom === null) { return; }
      var to = svgPoint(svg, ev, W), from = dragFrom; dragFrom = null;
      sel.setAttribute('visibility', 'hidden');
      var wide = Math.abs(to.x - from.x) >= 5, tall = Math.abs(to.y - from.y) > 20;
      if (!wide && !tall) {
        // A click: what this band holds at this moment.
        if (to.x < L || to.x > W - R) { return; }
        var i = nearest(invX(to.x));
        var band = bandAt(i, invY(to.y));
        if (band >= 0) { showBlocks(drill, m, i, band); }
        return;
      }
      if (wide) {
        var a = invX(Math.max(L, Math.min(from.x, to.x))), b = invX(Math.min(W - R, Math.max(from.x, to.x)));
        if (b > a) { domain = [a, b]; }
      }
      if (tall) {
        var lo = invY(Math.min(H - B, Math.max(from.y, to.y))), hi = invY(Math.max(T, Math.min(from.y, to.y)));
        if (hi > lo) { yDomain = [Math.max(0, lo), hi]; }
      }
      draw();
    });
    function resetZoom() { domain = full.slice(); yDomain = null; draw(); }
    svg.addEventListener('dblclick', resetZoom);
    reset.addEventListener('click', resetZoom);
    container.memtoolShow = function (col, band) { showBlocks(drill, m, col, band); };
    draw();
    drawn++;
  }

  // ---- drill-down: the blocks of one band live at one column ------------
  var DRILL_ROWS = 200;
  function liveAt(bl, x, k) {
    return bl.start[k] <= x && x < bl.end[k];
  }
  function hexAddr(bl, k) {
    if (!bl.base || bl.addr[k] < 0) { return ''; }
    try { return '0x' + (BigInt(bl.base) + BigInt(bl.addr[k])).toString(16); } catch (e) { return ''; }
  }
  // When a block was allocated: a time, or for memory allocated before the
  // recording (which the page's blocks start at the recording's start) that.
  function madeText(m, bl, k) {
    var s = bl.site[k] >= 0 ? bl.sites[bl.site[k]] : null;
    if (s && s.before) { return 'allocated before the recording' + (s.before === 'freed' ? ', freed later' : ''); }
    return 'allocated at ' + fmtX(m, bl.start[k]);
  }
  function showStack(panel, m, k) {
    var bl = m.blocks, old = panel.querySelector('.stackview');
    if (old) { panel.removeChild(old); }
    var box = htmlEl('div', 'stackview');
    var s = bl.site[k] >= 0 ? bl.sites[bl.site[k]] : null;
    var head = fmtBytes(bl.bytes[k]) + ' ' + madeText(m, bl, k) + (hexAddr(bl, k) ? ' at ' + hexAddr(bl, k) : '');
    box.appendChild(htmlEl('div', 'verdict', head));
    if (!s) { box.appendChild(htmlEl('p', 'omitted', 'stack not kept: the page keeps the stacks of ' + bl.sites.length + ' of ' + bl.total_sites + ' sites')); panel.appendChild(box); return; }
    var facts = [];
    if (s.op) { facts.push('op ' + s.op); }
    if (s.shape) { facts.push('shape ' + s.shape); }
    if (s.category) { facts.push('category ' + s.category); }
    if (facts.length) { box.appendChild(htmlEl('div', null, facts.join(' · '))); }
    if (s.stack.length === 0) { box.appendChild(htmlEl('p', 'omitted', 'no stack recorded')); }
    // The allocation of such a block was not recorded: the stack is its free's (MemoryViz: "alloc not recorded, stack trace for free").
    else if (s.before === 'freed') { box.appendChild(htmlEl('div', 'hint', 'allocation not recorded; stack of the free:')); }
    var ol = htmlEl('ol', 'stack');
    s.stack.forEach(function (f) {
      var fr = bl.frames[f];
      ol.appendChild(htmlEl('li', fr[1] ? 'lib' : null, fr[0]));
    });
    box.appendChild(ol);
    panel.appendChild(box);
  }
  // The blocks of one band live at one column (a click on the timeline).
  function showBlocks(panel, m, col, band) {
    var t = m.timeline, b = t.bands[band], x = t.x[col];
    blockList(panel, m, x, (b.short || b.key) + ' at ' + fmtX(m, x, col), b.key, b.v[col],
      function (bl, k) { return bl.band[k] === band; }, 'by group');
  }
  // The blocks live at the peak whose call-tree path passes through `path`
  // (labels from the root's child down; a click on the call tree).
  function showTreeBlocks(panel, m, path) {
    var bl = m.blocks, through = {};
    if (bl) {
      bl.sites.forEach(function (s, i) {
        through[i] = s.tree.length >= path.length && path.every(function (label, d) { return bl.frames[s.tree[d]][0] === label.n; });
      });
    }
    var last = path[path.length - 1];
    var name = path.length ? (last.s || last.n) : 'everything';
    blockList(panel, m, m.peak.x, name + ' at the peak', path.length ? last.n : '', path.length ? last.v : m.peak.bytes,
      function (b, k) { return b.site[k] >= 0 && through[b.site[k]]; }, 'with their stacks');
  }
  // The listed blocks live at `x` that `chosen` picks, largest first, with
  // how much of `expected` bytes they cover.
  function blockList(panel, m, x, heading, fullName, expected, chosen, keptHow) {
    while (panel.firstChild) { panel.removeChild(panel.firstChild); }
    var title = htmlEl('h4', null, heading + ': ' + fmtBytes(expected));
    if (fullName) { title.title = fullName; }
    panel.appendChild(title);
    var bl = m.blocks;
    if (!bl) { panel.appendChild(htmlEl('p', 'omitted', 'This memory is a series of snapshots: the tables below list what each holds.')); return; }
    var ks = [], listed = 0;
    for (var k = 0; k < bl.bytes.length; k++) {
      if (chosen(bl, k) && liveAt(bl, x, k)) { ks.push(k); listed += bl.bytes[k]; }
    }
    ks.sort(function (a, c) { return bl.bytes[c] - bl.bytes[a] || bl.start[a] - bl.start[c]; });
    var note = ks.length + (ks.length === 1 ? ' block' : ' blocks') + ' live here, ' + fmtBytes(listed) + ', largest first';
    if (ks.length > DRILL_ROWS) { note += ' (the first ' + DRILL_ROWS + ' shown)'; }
    if (listed < expected) { note += '; ' + fmtBytes(expected - listed) + ' in blocks the page does not list (it keeps the ' + bl.bytes.length + ' largest of ' + bl.total + ' blocks ' + keptHow + ')'; }
    panel.appendChild(htmlEl('p', 'hint', note + '. Click a row for its stack.'));
    var table = htmlEl('table', 'blocks');
    var hr = htmlEl('tr');
    ['size', 'requested', 'allocated at', 'age', 'address', 'op'].forEach(function (h, i) { hr.appendChild(htmlEl('th', i < 2 || i === 3 ? 'num' : null, h)); });
    var thead = htmlEl('thead'); thead.appendChild(hr); table.appendChild(thead);
    var body = htmlEl('tbody');
    ks.slice(0, DRILL_ROWS).forEach(function (k) {
      var tr = htmlEl('tr');
      var s = bl.site[k] >= 0 ? bl.sites[bl.site[k]] : null;
      var age = x - bl.start[k];
      var ageText = m.axis === 'time_ps' ? fmtSeconds(age / 1e12) : m.axis === 'time_us' ? fmtSeconds(age / 1e6) : age + ' events';
      // Allocated before the recording: when is unknown, its age at least this.
      var before = s && s.before;
      [fmtBytes(bl.bytes[k]), fmtBytes(bl.requested[k]), before ? 'before recording' : fmtX(m, bl.start[k]), (before ? '≥ ' : '') + ageText, hexAddr(bl, k), s ? s.op : ''].forEach(function (v, i) {
        tr.appendChild(htmlEl('td', i < 2 || i === 3 ? 'num' : null, v));
      });
      tr.addEventListener('click', function () {
        Array.prototype.forEach.call(body.rows, function (r) { r.classList.remove('chosen'); });
        tr.classList.add('chosen');
        showStack(panel, m, k);
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    panel.appendChild(table);
  }

  // ---- allocator state: segments and their blocks at a chosen moment ----
  function stateView(container, m) {
    var bl = m.blocks, t = m.timeline, n = t.x.length;
    if (!bl || !bl.segments || !bl.segments.length || n === 0) { return; }
    var peakCol = t.hi.indexOf(Math.max.apply(null, t.hi));
    var controls = htmlEl('div', 'controls');
    var prev = htmlEl('button', null, '◀'); prev.type = 'button';
    var next = htmlEl('button', null, '▶'); next.type = 'button';
    var slider = htmlEl('input'); slider.type = 'range'; slider.min = '0'; slider.max = String(n - 1); slider.value = String(peakCol);
    slider.setAttribute('aria-label', 'moment');
    var where = htmlEl('span', 'where');
    controls.appendChild(prev); controls.appendChild(slider); controls.appendChild(next); controls.appendChild(where);
    container.appendChild(controls);
    var summary = htmlEl('div', 'hint'); container.appendChild(summary);
    var holder = htmlEl('div', 'segments'); container.appendChild(holder);
    var detail = htmlEl('div', 'drill'); container.appendChild(detail);
    var tip = tooltip(container);
    var MAXROWS = 120, ROWH = 16;
    // Blocks by address, for each segment's search.
    var byAddr = [];
    for (var k = 0; k < bl.bytes.length; k++) { if (bl.addr[k] >= 0) { byAddr.push(k); } }
    byAddr.sort(function (a, b) { return bl.addr[a] - bl.addr[b]; });
    var addrs = byAddr.map(function (k) { return bl.addr[k]; });
    function draw(col) {
      var x = t.x[col];
      where.textContent = fmtX(m, x, col) + (col === peakCol ? ' (peak)' : '') + ' — ' + fmtBytes(t.hi[col]) + ' live';
      while (holder.firstChild) { holder.removeChild(holder.firstChild); }
      var segs = bl.segments.filter(function (s) { return s[2] <= x && x < s[3]; });
      var largest = 1, held = 0, used = 0;
      segs.forEach(function (s) { largest = Math.max(largest, s[1]); held += s[1]; });
      var W = 1000;
      var rows = Math.min(segs.length, MAXROWS);
      var svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + Math.max(1, rows * ROWH), role: 'img', 'aria-label': 'allocator state' });
      var blocksDrawn = 0;
      segs.slice(0, MAXROWS).forEach(function (s, r) {
        var w = Math.max(2, s[1] / largest * W), y = r * ROWH;
        var seg = svgEl('rect', { x: 0, y: y + 1, width: w, height: ROWH - 3, 'class': 'segment' });
        seg.appendChild(svgEl('title', {}, 'segment ' + (bl.base ? '+0x' + s[0].toString(16) : '') + ', ' + fmtBytes(s[1])));
        svg.appendChild(seg);
        var j = lowerBound(addrs, s[0]);
        for (; j < addrs.length && addrs[j] < s[0] + s[1]; j++) {
          var kk = byAddr[j];
          if (!liveAt(bl, x, kk)) { continue; }
          used += bl.bytes[kk];
          var bx = (bl.addr[kk] - s[0]) / s[1] * w, bw = Math.max(0.8, bl.bytes[kk] / s[1] * w);
          var band = t.bands[bl.band[kk]] || { color: '#888', key: '' };
          var rect = svgEl('rect', { x: bx.toFixed(2), y: y + 1, width: bw.toFixed(2), height: ROWH - 3, fill: band.color, 'class': 'block', 'data-k': kk });
          svg.appendChild(rect);
          blocksDrawn++;
        }
      });
      svg.addEventListener('mousemove', function (ev) {
        var k = ev.target.getAttribute && ev.target.getAttribute('data-k');
        if (k === null || k === undefined) { tip.hide(); return; }
        k = +k;
        var s = bl.site[k] >= 0 ? bl.sites[bl.site[k]] : null;
        var band = t.bands[bl.band[k]];
        tip.show([fmtBytes(bl.bytes[k]) + ' at ' + hexAddr(bl, k), (band ? band.key : ''), madeText(m, bl, k) + (s && s.op ? ' · ' + s.op : ''), 'click for its stack'], ev);
      });
      svg.addEventListener('mouseleave', function () { tip.hide(); });
      svg.addEventListener('click', function (ev) {
        var k = ev.target.getAttribute && ev.target.getAttribute('data-k');
        if (k === null || k === undefined) { return; }
        while (detail.firstChild) { detail.removeChild(detail.firstChild); }
        showStack(detail, m, +k);
      });
      holder.appendChild(svg);
      holder.setAttribute('data-segments', String(segs.length));
      holder.setAttribute('data-blocks', String(blocksDrawn));
      summary.textContent = segs.length + ' segment(s) held, ' + fmtBytes(held) + '; ' + fmtBytes(used) + ' in the blocks listed, ' + fmtBytes(Math.max(0, held - used)) + ' free or in unlisted blocks' +
        (segs.length > MAXROWS ? '; the first ' + MAXROWS + ' segments drawn' : '') +
        (bl.segments.length < bl.total_segments ? '; the page keeps ' + bl.segments.length + ' of ' + bl.total_segments + ' segments' : '') +
        '. Rows: segments, low address first, widths to scale with the largest; coloured: blocks, as in the timeline; pale: free.';
    }
    slider.addEventListener('input', function () { draw(+slider.value); });
    prev.addEventListener('click', function () { slider.value = String(Math.max(0, +slider.value - 1)); draw(+slider.value); });
    next.addEventListener('click', function () { slider.value = String(Math.min(n - 1, +slider.value + 1)); draw(+slider.value); });
    container.memtoolShow = function (col) { slider.value = String(col); draw(col); };
    draw(peakCol);
    drawn++;
  }

  // ---- icicle of live memory by call stack -------------------------------
  function flame(container, root, diff, groupColors, onPick) {
    var ROW = 18, MAXROWS = 48;
    var maxDelta = 1;
    // The root's change is the sum of all: scale colours to the frames below it.
    (function walk(nd) { if (diff && nd !== root) { maxDelta = Math.max(maxDelta, Math.abs(nd.v - (nd.b || 0))); } (nd.c || []).forEach(walk); })(root);
    var tip = tooltip(container);
    function weight(nd) { return diff ? Math.max(nd.v, nd.b || 0) : nd.v; }
    function color(nd) {
      if (!diff && groupColors && groupColors[nd.n]) { return groupColors[nd.n]; }
      if (!diff) { var h = fnv(nd.n); return 'hsl(' + (h % 360) + ' 65% ' + (68 + (h >> 9) % 3 * 5) + '%)'; }
      var d = nd.v - (nd.b || 0), r = Math.min(1, Math.abs(d) / maxDelta);
      if (d === 0) { return 'hsl(0 0% 84%)'; }
      return 'hsl(' + (d > 0 ? 2 : 215) + ' 80% ' + (88 - 38 * r).toFixed(1) + '%)';
    }
    function describe(nd, total) {
      var lines = [nd.n];
      var share = total > 0 ? ' (' + (100 * nd.v / total).toFixed(1) + '% of ' + fmtBytes(total) + ')' : '';
      if (diff) {
        var b = nd.b || 0;
        lines.push('base ' + fmtBytes(b) + ' → new ' + fmtBytes(nd.v) + ' (' + (nd.v >= b ? '+' : '') + fmtBytes(nd.v - b) + ')');
      } else { lines.push(fmtBytes(nd.v) + share); }
      return lines;
    }
    var current = [root];
    function render(path) {
      current = path;
      Array.prototype.slice.call(container.querySelectorAll('.fn')).forEach(function (e) { container.removeChild(e); });
      var focus = path[path.length - 1];
      var maxDepth = path.length;
      function box(nd, depth, x, w, anc) {
        var d = htmlEl('div', 'fn' + (anc ? ' anc' : ''), nd.s || nd.n);
        d.style.left = (x * 100) + '%'; d.style.width = (w * 100) + '%';
        d.style.top = (depth * ROW) + 'px'; d.style.background = color(nd);
        d.addEventListener('mousemove', function (ev) { tip.show(describe(nd, root.v), ev); });
        d.addEventListener('mouseleave', function () { tip.hide(); });
        d.addEventListener('click', function () {
          tip.hide();
          if (anc) { render(path.slice(0, path.indexOf(nd) + 1)); } else { render(path.concat(chain(nd))); }
          if (onPick) { onPick(current.slice(1)); }
        });
        container.appendChild(d);
      }
      // Ancestors of the focus, full width.
      for (var i = 0; i < path.length - 1; i++) { box(path[i], i, 0, 1, true); }
      function layout(nd, depth, x, w) {
        if (w < 0.0015 || depth - path.length >= MAXROWS) { return; }
        box(nd, depth, x, w, false);
        maxDepth = Math.max(maxDepth, depth + 1);
        var kids = nd.c || [], sum = 0;
        kids.forEach(function (k) { sum += weight(k); });
        var scale = w / Math.max(weight(nd), sum, 1), cx = x;
        kids.forEach(function (k) { var kw = weight(k) * scale; layout(k, depth + 1, cx, kw); cx += kw; });
      }
      layout(focus, path.length - 1, 0, 1);
      container.setAttribute('data-nodes', String(container.querySelectorAll('.fn').length));
      container.style.height = (maxDepth * ROW + 2) + 'px';
    }
    // The nodes from the focus's child down to `nd` (parents of a clicked node
    // are found by search: the tree has no parent links).
    function chain(target) {
      var focus = current[current.length - 1], out = [];
      (function find(nd, acc) {
        if (nd === target) { out = acc.concat([nd]); return true; }
        return (nd.c || []).some(function (k) { return find(k, acc.concat(nd === focus ? [] : [nd])); });
      })(focus, []);
      return out;
    }
    render([root]);
    drawn++;
  }

  // ---- leak chart: total and the top growing stacks over the points ------
  function leakChart(container, m) {
    var lk = m.leaks, n = lk.total.length;
    if (n < 2) { return; }
    container.classList.add('chart');
    var W = 1000, H = 170, L = 70, R = 14, T = 10, B = 24;
    // Growth is small next to the total: the lines get the whole height,
    // unless they are handovers, whose rise means nothing without the total
    // that did not grow.
    var withTotal = lk.lines.length === 0 || lk.handover;
    var top = 1;
    lk.lines.forEach(function (b) { top = Math.max(top, Math.max.apply(null, b.v)); });
    if (withTotal) { top = Math.max(top, Math.max.apply(null, lk.total.concat([1]))); }
    var step = byteStep(top), yMax = Math.max(step, Math.ceil(top * 1.04 / step) * step);
    var sx = function (i) { return L + i / (n - 1) * (W - L - R); };
    var sy = function (b) { return T + (1 - b / yMax) * (H - T - B); };
    var svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'growth over the points' });
    for (var y = 0; y <= yMax + 1e-9; y += step) {
      svg.appendChild(svgEl('line', { x1: L, x2: W - R, y1: sy(y), y2: sy(y), 'class': 'gridline' }));
      svg.appendChild(svgEl('text', { x: L - 6, y: sy(y) + 4, 'text-anchor': 'end' }, fmtBytes(y)));
    }
    svg.appendChild(svgEl('text', { x: L, y: H - 6 }, lk.labels[0]));
    svg.appendChild(svgEl('text', { x: W - R, y: H - 6, 'text-anchor': 'end' }, lk.labels[n - 1]));
    function line(values, color, cls, title) {
      var pts = values.map(function (v, i) { return sx(i).toFixed(1) + ',' + sy(v).toFixed(1); });
      var p = svgEl('polyline', { points: pts.join(' '), fill: 'none', stroke: color, 'stroke-width': cls ? 1.2 : 2, 'class': cls || '' });
      p.appendChild(svgEl('title', {}, title));
      svg.appendChild(p);
    }
    if (withTotal) { line(lk.total, 'currentColor', 'lo', 'total'); }
    lk.lines.forEach(function (b) { line(b.v, b.color, null, b.key); });
    container.appendChild(svg);
    var legend = htmlEl('div', 'legend');
    var totalText = fmtBytes(lk.total[0]) + ' → ' + fmtBytes(lk.total[n - 1]);
    if (lk.handover) {
      legend.appendChild(htmlEl('span', 'item', 'dashed: total live bytes (' + totalText + ')'));
      legend.appendChild(htmlEl('span', 'item', 'solid: stacks that grew while others freed as much (a handover)'));
    } else {
      legend.appendChild(htmlEl('span', 'item', lk.lines.length ? 'live bytes of the growing stacks below (total: ' + totalText + ')' : 'dashed: total live bytes'));
    }
    container.appendChild(legend);
    drawn++;
  }

  function each(selector, fn) {
    Array.prototype.forEach.call(document.querySelectorAll(selector), function (e) {
      try { fn(e); } catch (err) { errors.push(selector + ': ' + (err && err.message ? err.message : String(err))); }
    });
  }
  var data;
  try { data = JSON.parse(document.getElementById('memtool-data').textContent); } catch (err) { errors.push('data: ' + err.message); data = { memories: [] }; }
  var byDom = {};
  data.memories.forEach(function (m) { byDom[m.dom] = m; });
  // The helpers the other scripts (alloc.js, program.js, addr.js, tables.js)
  // draw with; `drew` counts a chart drawn.
  var lib = {
    htmlEl: htmlEl, fmtBytes: fmtBytes, fmtX: fmtX, tooltip: tooltip,
    liveAt: liveAt, hexAddr: hexAddr, madeText: madeText, drew: function () { drawn++; }
  };
  each('.timeline[data-mem]', function (e) { timeline(e, byDom[e.getAttribute('data-mem')]); });
  each('.flame[data-mem]', function (e) {
    var m = byDom[e.getAttribute('data-mem')], colors = {};
    // A frame that is one of the timeline's groups has the group's colour.
    m.timeline.bands.forEach(function (b) { colors[b.key] = b.color; });
    var pick = null;
    if (m.blocks) {
      // A click on a frame also lists the blocks under it live at the peak.
      var drill = htmlEl('div', 'drill');
      e.parentNode.insertBefore(drill, e.nextSibling);
      pick = function (path) { showTreeBlocks(drill, m, path); };
    }
    flame(e, m.flame, false, colors, pick);
  });
  each('.flame[data-diff]', function (e) { if (data.diff) { flame(e, data.diff, true); } });
  each('.leakchart[data-mem]', function (e) { leakChart(e, byDom[e.getAttribute('data-mem')]); });
  each('.addr[data-mem]', function (e) { memtoolAddrView(e, byDom[e.getAttribute('data-mem')], lib); });
  each('.state[data-mem]', function (e) { stateView(e, byDom[e.getAttribute('data-mem')]); });
  // Compiled programs (templates/program.js): blocks, then the peak's bars.
  each('.allocview[data-mem]', function (e) { memtoolAllocView(e, byDom[e.getAttribute('data-mem')], lib); });
  each('.progchart[data-mem]', function (e) {
    var peakBars = e.parentNode.querySelector('.progpeak[data-mem="' + e.getAttribute('data-mem') + '"]');
    memtoolProgramChart(e, peakBars, byDom[e.getAttribute('data-mem')], lib);
  });
  var tables = memtoolTables(lib);
  each('table.sortable', tables.sortable);
  each('input.filter', tables.filterable);
  each('table.sortable', tables.foldable);
  if (location.hash === '#memtool-selftest') {
    try { memtoolSelfTest(byDom); } catch (err) { errors.push('selftest: ' + err.message); }
  }
  setStatus();
  // For the browser check: when the page's script finished (time since the
  // navigation started), and when the first frame after it was drawn.
  var html = document.documentElement;
  html.setAttribute('data-memtool-ms', String(Math.round(performance.now())));
  if (window.requestAnimationFrame) {
    requestAnimationFrame(function () { html.setAttribute('data-memtool-first-frame-ms', String(Math.round(performance.now()))); });
  }
})();
