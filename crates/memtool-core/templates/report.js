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
      case 'time_ps': return 't+' + fmtSeconds(x / 1e12);
      case 'time_us': return 't+' + fmtSeconds(x / 1e6);
      case 'snapshot':
        if (m.labels && col !== undefined && m.labels[col] !== undefined) { return m.labels[col]; }
        return '#' + Math.round(x + m.timeline.x0);
      default: return '#' + Math.round(x + m.timeline.x0);
    }
  }
  function fmtSeconds(s) {
    var a = Math.abs(s);
    if (a === 0) { return '0 s'; }
    if (a < 1e-6) { return (s * 1e9).toPrecision(4) + ' ns'; }
    if (a < 1e-3) { return (s * 1e6).toPrecision(4) + ' µs'; }
    if (a < 1) { return (s * 1e3).toPrecision(4) + ' ms'; }
    return s.toPrecision(5) + ' s';
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
    return niceStep(max / unit, 4) * unit;
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
    var t = m.timeline, n = t.x.length;
    if (n === 0) { return; }
    container.classList.add('chart');
    var W = 1000, H = 300, L = 70, R = 14, T = 16, B = 28;
    // Each column holds until the next one; the last holds for one average
    // column, so a final snapshot (often the peak) has a width like the others.
    var lastW = n > 1 ? (t.x[n - 1] - t.x[0]) / (n - 1) : 1;
    var full = n === 1 ? [t.x[0] - 0.5, t.x[0] + 0.5] : [t.x[0], t.x[n - 1] + lastW];
    if (full[0] === full[1]) { full = [full[0] - 1, full[1] + 1]; }
    var domain = full.slice();
    var svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'memory timeline' });
    var bar = htmlEl('div', 'hint');
    var reset = htmlEl('button', 'reset', 'reset zoom'); reset.type = 'button'; reset.hidden = true;
    bar.appendChild(reset);
    container.appendChild(svg);
    container.appendChild(bar);
    var legend = htmlEl('div', 'legend'); container.appendChild(legend);
    var tip = tooltip(container);
    var peakCol = t.hi.indexOf(Math.max.apply(null, t.hi));
    t.bands.forEach(function (b) {
      var item = htmlEl('span', 'item'); item.title = b.key;
      var sw = htmlEl('span', 'swatch'); sw.style.background = b.color; item.appendChild(sw);
      item.appendChild(document.createTextNode(b.key + ' — ' + fmtBytes(b.v[peakCol] || 0) + ' at peak'));
      legend.appendChild(item);
    });
    if (m.capacity) {
      legend.appendChild(htmlEl('span', 'item', 'capacity ' + fmtBytes(m.capacity) + ' (dashed)'));
    }
    if (m.reserved && m.reserved.length) {
      legend.appendChild(htmlEl('span', 'item', 'allocator reserved (line)'));
    }
    var sx, sy, yMax, vis;
    function draw() {
      while (svg.firstChild) { svg.removeChild(svg.firstChild); }
      var d0 = domain[0], d1 = domain[1];
      var i0 = Math.max(0, lowerBound(t.x, d0) - 1), i1 = Math.min(n - 1, lowerBound(t.x, d1));
      vis = [i0, i1];
      var top = 0;
      for (var i = i0; i <= i1; i++) { top = Math.max(top, t.hi[i]); }
      (m.reserved || []).forEach(function (r) { if (r[0] >= d0 && r[0] <= d1) { top = Math.max(top, r[1]); } });
      var capOnScale = m.capacity && m.capacity <= Math.max(top, 1) * 1.5;
      if (capOnScale) { top = Math.max(top, m.capacity); }
      var step = byteStep(Math.max(top, 1));
      yMax = Math.max(step, Math.ceil(top * 1.04 / step) * step);
      sx = function (x) { return L + (x - d0) / (d1 - d0) * (W - L - R); };
      sy = function (b) { return T + (1 - b / yMax) * (H - T - B); };
      for (var y = 0; y <= yMax + 1e-9; y += step) {
        svg.appendChild(svgEl('line', { x1: L, x2: W - R, y1: sy(y), y2: sy(y), 'class': 'gridline' }));
        svg.appendChild(svgEl('text', { x: L - 6, y: sy(y) + 4, 'text-anchor': 'end' }, fmtBytes(y)));
      }
      var timeAxis = m.axis === 'time_ps' || m.axis === 'time_us';
      var xs = niceStep(d1 - d0, 6);
      // Snapshots, events and program steps are whole numbers.
      if (!timeAxis) { xs = Math.max(1, Math.round(xs)); }
      var ticks = [];
      if (n === 1) { ticks = [t.x[0]]; } else {
        for (var xt = Math.ceil(d0 / xs) * xs; xt <= d1 + 1e-9; xt += xs) { ticks.push(xt); }
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
      t.bands.forEach(function (b) {
        var d = '';
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
        var p = svgEl('path', { d: d, fill: b.color, 'fill-opacity': 0.88, stroke: b.color, 'stroke-width': 0.6 });
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
      }
      if (capOnScale) {
        g.appendChild(svgEl('line', { x1: L, x2: W - R, y1: sy(m.capacity), y2: sy(m.capacity), 'class': 'capacity' }));
      }
      // Step boundaries; labels only where there is room for them.
      var steps = (m.steps || []).filter(function (st) { return st.x >= d0 && st.x <= d1; });
      var lastLabel = -Infinity;
      steps.forEach(function (st) {
        var x = sx(st.x);
        g.appendChild(svgEl('line', { x1: x, x2: x, y1: T, y2: H - B, 'class': 'step' }));
        if (x - lastLabel > 60) {
          svg.appendChild(svgEl('text', { x: x + 3, y: T + 8, 'class': 'steplabel' }, st.label));
          lastLabel = x;
        }
      });
      // Training phases: a strip along the top, named where there is room.
      (m.phases || []).forEach(function (ph) {
        if (ph.end < d0 || ph.start > d1) { return; }
        var a = sx(Math.max(ph.start, d0)), b = Math.max(a + 1, sx(Math.min(ph.end, d1)));
        var r = svgEl('rect', { x: a, y: T - 6, width: b - a, height: 5, fill: ph.color, 'class': 'phase' });
        r.appendChild(svgEl('title', {}, ph.phase));
        svg.appendChild(r);
        if (b - a > 8 * ph.phase.length) {
          svg.appendChild(svgEl('text', { x: a, y: T - 8, 'class': 'phaselabel' }, ph.phase));
        }
      });
      var px = n === 1 ? sx(t.x[0]) : sx(m.peak.x);
      if (px >= L && px <= W - R) {
        g.appendChild(svgEl('line', { x1: px, x2: px, y1: sy(m.peak.bytes), y2: H - B, 'class': 'peak' }));
        g.appendChild(svgEl('circle', { cx: px, cy: sy(m.peak.bytes), r: 3.5, fill: 'none', 'class': 'peak' }));
        var right = px > W * 0.75;
        svg.appendChild(svgEl('text', { x: px + (right ? -6 : 6), y: Math.max(T + 10, sy(m.peak.bytes) - 6), 'class': 'peaklabel', 'text-anchor': right ? 'end' : 'start' }, 'peak ' + m.peak.text + ' at ' + m.peak.label));
      }
      cursor = svgEl('line', { x1: 0, x2: 0, y1: T, y2: H - B, 'class': 'cursor', visibility: 'hidden' }); svg.appendChild(cursor);
      sel = svgEl('rect', { x: 0, y: T, width: 0, height: H - T - B, 'class': 'selection', visibility: 'hidden' }); svg.appendChild(sel);
      reset.hidden = domain[0] === full[0] && domain[1] === full[1];
    }
    var cursor, sel, dragFrom = null;
    function invX(px) { return domain[0] + (px - L) / (W - L - R) * (domain[1] - domain[0]); }
    // The column whose step covers x: the last one starting at or before it.
    function nearest(x) {
      var i = lowerBound(t.x, x);
      if (i < n && t.x[i] === x) { return i; }
      return Math.max(0, Math.min(n - 1, i - 1));
    }
    svg.addEventListener('mousemove', function (ev) {
      var p = svgPoint(svg, ev, W);
      if (dragFrom !== null) {
        var a = Math.max(L, Math.min(dragFrom, p.x)), b = Math.min(W - R, Math.max(dragFrom, p.x));
        sel.setAttribute('x', a); sel.setAttribute('width', b - a); sel.setAttribute('visibility', 'visible');
      }
      if (p.x < L || p.x > W - R) { tip.hide(); cursor.setAttribute('visibility', 'hidden'); return; }
      var i = nearest(invX(p.x));
      var cx = n === 1 ? p.x : sx(t.x[i]);
      cursor.setAttribute('x1', cx); cursor.setAttribute('x2', cx); cursor.setAttribute('visibility', 'visible');
      var value = (1 - (p.y - T) / (H - T - B)) * yMax, acc = 0, under = null;
      for (var k = 0; k < t.bands.length; k++) {
        acc += t.bands[k].v[i];
        if (value <= acc && t.bands[k].v[i] > 0) { under = t.bands[k]; break; }
      }
      var lines = [fmtX(m, t.x[i], i), 'total ' + fmtBytes(t.hi[i]) + (t.lo[i] < t.hi[i] ? ' (lowest in this column ' + fmtBytes(t.lo[i]) + ')' : '')];
      if (under) { lines.push(under.key + ': ' + fmtBytes(under.v[i])); }
      tip.show(lines, ev);
    });
    svg.addEventListener('mouseleave', function () { tip.hide(); cursor.setAttribute('visibility', 'hidden'); dragFrom = null; sel.setAttribute('visibility', 'hidden'); });
    svg.addEventListener('mousedown', function (ev) { ev.preventDefault(); dragFrom = svgPoint(svg, ev, W).x; });
    svg.addEventListener('mouseup', function (ev) {
      if (dragFrom === null) { return; }
      var to = svgPoint(svg, ev, W).x, from = dragFrom; dragFrom = null;
      sel.setAttribute('visibility', 'hidden');
      if (Math.abs(to - from) < 5) { return; }
      var a = invX(Math.max(L, Math.min(from, to))), b = invX(Math.min(W - R, Math.max(from, to)));
      if (b > a) { domain = [a, b]; draw(); }
    });
    function resetZoom() { domain = full.slice(); draw(); }
    svg.addEventListener('dblclick', resetZoom);
    reset.addEventListener('click', resetZoom);
    draw();
    drawn++;
  }

  // ---- icicle of live memory by call stack -------------------------------
  function flame(container, root, diff) {
    var ROW = 18, MAXROWS = 48;
    var maxDelta = 1;
    // The root's change is the sum of all: scale colours to the frames below it.
    (function walk(nd) { if (diff && nd !== root) { maxDelta = Math.max(maxDelta, Math.abs(nd.v - (nd.b || 0))); } (nd.c || []).forEach(walk); })(root);
    var tip = tooltip(container);
    function weight(nd) { return diff ? Math.max(nd.v, nd.b || 0) : nd.v; }
    function color(nd) {
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
        var d = htmlEl('div', 'fn' + (anc ? ' anc' : ''), nd.n);
        d.style.left = (x * 100) + '%'; d.style.width = (w * 100) + '%';
        d.style.top = (depth * ROW) + 'px'; d.style.background = color(nd);
        d.addEventListener('mousemove', function (ev) { tip.show(describe(nd, root.v), ev); });
        d.addEventListener('mouseleave', function () { tip.hide(); });
        d.addEventListener('click', function () {
          tip.hide();
          if (anc) { render(path.slice(0, path.indexOf(nd) + 1)); } else { render(path.concat(chain(nd))); }
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
    // Growth is small next to the total: the lines get the whole height.
    var top = 1;
    lk.lines.forEach(function (b) { top = Math.max(top, Math.max.apply(null, b.v)); });
    if (lk.lines.length === 0) { top = Math.max.apply(null, lk.total.concat([1])); }
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
    if (lk.lines.length === 0) { line(lk.total, 'currentColor', 'lo', 'total'); }
    lk.lines.forEach(function (b) { line(b.v, b.color, null, b.key); });
    container.appendChild(svg);
    var legend = htmlEl('div', 'legend');
    legend.appendChild(htmlEl('span', 'item', lk.lines.length ? 'live bytes of the growing stacks below (total: ' + fmtBytes(lk.total[0]) + ' → ' + fmtBytes(lk.total[n - 1]) + ')' : 'dashed: total live bytes'));
    container.appendChild(legend);
    drawn++;
  }

  // ---- address × time grid ----------------------------------------------
  function addrView(container, m) {
    var a = m.addr;
    if (!a) { return; }
    var colors = m.timeline.bands.map(function (b) { return b.color; });
    var canvas = htmlEl('canvas', 'addrgrid');
    canvas.width = a.cols; canvas.height = a.rows;
    canvas.style.aspectRatio = a.cols + ' / ' + Math.max(a.rows, a.cols / 4);
    var ctx = canvas.getContext('2d');
    var dark = window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches;
    ctx.fillStyle = dark ? '#1e2228' : '#f5f7fa';
    ctx.fillRect(0, 0, a.cols, a.rows);
    function bandIndex(ch) {
      var c = ch.charCodeAt(0);
      if (c >= 65 && c <= 90) { return c - 65; }
      if (c >= 97 && c <= 122) { return c - 97 + 26; }
      return -1;
    }
    var painted = 0;
    for (var r = 0; r < a.rows; r++) {
      for (var c = 0; c < a.cols; c++) {
        var b = bandIndex(a.grid.charAt(r * a.cols + c));
        if (b < 0) { continue; }
        painted++;
        ctx.fillStyle = colors[Math.min(b, colors.length - 1)] || '#888';
        ctx.fillRect(c, r, 1, 1);
      }
    }
    container.appendChild(canvas);
    // For the browser check: a canvas has no DOM to inspect.
    container.setAttribute('data-cells', String(painted));
    var tip = tooltip(container);
    canvas.addEventListener('mousemove', function (ev) {
      var rect = canvas.getBoundingClientRect();
      var c = Math.floor((ev.clientX - rect.left) / rect.width * a.cols), r = Math.floor((ev.clientY - rect.top) / rect.height * a.rows);
      if (c < 0 || r < 0 || c >= a.cols || r >= a.rows) { tip.hide(); return; }
      var x = a.x[0] + (a.x[1] - a.x[0]) * c / Math.max(1, a.cols - 1);
      var seg = null;
      for (var s = 0; s < a.segments.length; s++) { if (a.segments[s][2] <= r) { seg = a.segments[s]; } }
      var b = bandIndex(a.grid.charAt(r * a.cols + c));
      var lines = [fmtX(m, x)];
      if (seg) { lines.push('range from 0x' + seg[0].toString(16) + ' (' + fmtBytes(seg[1] - seg[0]) + ')'); }
      var band = m.timeline.bands[Math.min(b, m.timeline.bands.length - 1)];
      lines.push(b < 0 ? 'free' : band ? band.key : 'in use');
      tip.show(lines, ev);
    });
    canvas.addEventListener('mouseleave', function () { tip.hide(); });
    container.appendChild(htmlEl('div', 'hint', a.segments.length + ' address range(s) shown, ' + fmtBytes(a.span) + ' in all; rows top to bottom: low to high addresses.'));
    drawn++;
  }

  // ---- sortable, filterable tables ---------------------------------------
  function sortable(table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var desc = !th.classList.contains('sorted-desc');
        Array.prototype.forEach.call(heads, function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
        th.classList.add(desc ? 'sorted-desc' : 'sorted-asc');
        var key = function (row) {
          var cell = row.cells[col];
          if (!cell) { return ''; }
          var v = cell.getAttribute('data-v');
          if (v !== null) { return parseFloat(v); }
          var num = parseFloat(cell.textContent);
          return isNaN(num) || String(num) !== cell.textContent.trim() ? cell.textContent.toLowerCase() : num;
        };
        rows.sort(function (a, b) {
          var ka = key(a), kb = key(b);
          var r = ka < kb ? -1 : ka > kb ? 1 : 0;
          return desc ? -r : r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }
  function filterable(input) {
    var table = input.nextElementSibling;
    if (!table || table.tagName !== 'TABLE') { return; }
    input.addEventListener('input', function () {
      var q = input.value.toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        row.hidden = q !== '' && row.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
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
  each('.timeline[data-mem]', function (e) { timeline(e, byDom[e.getAttribute('data-mem')]); });
  each('.flame[data-mem]', function (e) { flame(e, byDom[e.getAttribute('data-mem')].flame, false); });
  each('.flame[data-diff]', function (e) { if (data.diff) { flame(e, data.diff, true); } });
  each('.leakchart[data-mem]', function (e) { leakChart(e, byDom[e.getAttribute('data-mem')]); });
  each('.addr[data-mem]', function (e) { addrView(e, byDom[e.getAttribute('data-mem')]); });
  each('table.sortable', sortable);
  each('input.filter', filterable);
  // Opened as report.html#memtool-selftest (the browser check does), the page
  // drives its own controls with synthetic events and records what happened.
  function selfTest() {
    var results = [];
    function check(name, ok) { results.push(name + (ok ? ':ok' : ':FAIL')); }
    function mouse(target, type, x, y) {
      target.dispatchEvent(new MouseEvent(type, { bubbles: true, clientX: x, clientY: y, buttons: type === 'mouseup' ? 0 : 1 }));
    }
    var tl = document.querySelector('.timeline svg');
    if (tl) {
      var r = tl.getBoundingClientRect(), y = r.top + r.height * 0.8;
      mouse(tl, 'mousemove', r.left + r.width * 0.5, y);
      var tip = tl.parentNode.querySelector('.tooltip');
      check('hover', tip && !tip.hidden && tip.textContent.indexOf('total') >= 0);
      var reset = tl.parentNode.querySelector('button.reset');
      var svgNow = tl;
      mouse(tl, 'mousedown', r.left + r.width * 0.3, y);
      mouse(tl, 'mousemove', r.left + r.width * 0.6, y);
      mouse(tl, 'mouseup', r.left + r.width * 0.6, y);
      check('zoom', reset && !reset.hidden);
      svgNow.dispatchEvent(new MouseEvent('dblclick', { bubbles: true }));
      check('unzoom', reset && reset.hidden);
    }
    var table = document.querySelector('table.sortable');
    if (table && table.tBodies[0].rows.length > 1) {
      var numCol = -1;
      Array.prototype.forEach.call(table.tBodies[0].rows[0].cells, function (c, i) { if (numCol < 0 && c.hasAttribute('data-v')) { numCol = i; } });
      if (numCol >= 0) {
        var th = table.tHead.rows[0].cells[numCol];
        th.click(); th.click();
        var vals = Array.prototype.map.call(table.tBodies[0].rows, function (row) { return parseFloat(row.cells[numCol].getAttribute('data-v')); });
        check('sort', vals.every(function (v, i) { return i === 0 || vals[i - 1] <= v; }));
      }
      var input = table.previousElementSibling;
      if (input && input.classList.contains('filter')) {
        input.value = '\u0000no such row\u0000';
        input.dispatchEvent(new Event('input'));
        var hidden = Array.prototype.every.call(table.tBodies[0].rows, function (row) { return row.hidden; });
        input.value = '';
        input.dispatchEvent(new Event('input'));
        check('filter', hidden && !table.tBodies[0].rows[0].hidden);
      }
    }
    var fl = document.querySelector('.flame');
    if (fl) {
      var boxes = fl.querySelectorAll('.fn');
      var deep = boxes[boxes.length - 1];
      if (deep && boxes.length > 1) {
        deep.click();
        var zoomed = fl.querySelectorAll('.fn.anc').length > 0;
        fl.querySelector('.fn.anc').click();
        check('flame', zoomed && fl.querySelectorAll('.fn.anc').length === 0);
      }
    }
    document.documentElement.setAttribute('data-memtool-selftest', results.join(' '));
  }
  if (location.hash === '#memtool-selftest') {
    try { selfTest(); } catch (err) { errors.push('selftest: ' + err.message); }
  }
  setStatus();
})();
