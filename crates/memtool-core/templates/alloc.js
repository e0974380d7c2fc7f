// memtool report: the allocation view, every allocation its own band stacked
// in allocation order (PyTorch memory_viz's "Active Memory Timeline"), drawn
// from the columns render/alloc_view.rs precomputes. Loaded before
// report.js, which calls memtoolAllocView with its helpers. Profile text is
// only ever put into the page with textContent, never as HTML.
var memtoolAllocView = (function () {
  'use strict';
  // A group's colour (the timeline's), shaded per allocation so that
  // neighbouring bands of one group read apart.
  function shade(hex, i) {
    var v = /^#([0-9a-f]{6})$/i.exec(hex || ''), x = v ? parseInt(v[1], 16) : 0x888888;
    var f = 0.72 + 0.28 * ((i * 7) % 5) / 4;
    return 'rgb(' + [(x >> 16) & 255, (x >> 8) & 255, x & 255].map(function (c) { return Math.round(c * f); }).join(',') + ')';
  }

  // Opened as #memtool-selftest: a band low in the middle column names
  // itself on hover.
  function selfTest(check) {
    var canvas = document.querySelector('.allocview canvas');
    if (!canvas) { return; }
    var r = canvas.getBoundingClientRect();
    canvas.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: r.left + r.width * 0.5, clientY: r.top + r.height * 0.85 }));
    var tip = canvas.parentNode.querySelector('.tooltip');
    check('alloc', +canvas.parentNode.getAttribute('data-columns') > 0 && tip && !tip.hidden && tip.textContent.length > 0);
    // The wheel zooms in around the pointer, shift+wheel pans right, the
    // reset button shows it all again.
    var view = canvas.parentNode, zoom = function () { return (view.getAttribute('data-zoom') || '0 1').split(' ').map(Number); };
    var at = { bubbles: true, cancelable: true, clientX: r.left + r.width * 0.5, clientY: r.top + r.height * 0.5 };
    canvas.dispatchEvent(new WheelEvent('wheel', Object.assign({ deltaY: -200 }, at)));
    var zoomed = zoom();
    canvas.dispatchEvent(new WheelEvent('wheel', Object.assign({ deltaY: 200, shiftKey: true }, at)));
    var panned = zoom();
    view.querySelector('.controls button').click();
    var reset = zoom();
    check('allocZoom', zoomed[1] - zoomed[0] < 0.9 && zoomed[0] > 0 && zoomed[1] < 1 &&
      panned[0] > zoomed[0] && Math.abs((panned[1] - panned[0]) - (zoomed[1] - zoomed[0])) < 1e-4 &&
      reset[0] === 0 && reset[1] === 1);
  }

  function view(container, m, lib) {
    var av = m && m.alloc;
    if (!av) { return; }
    // user frame, category, phase, op; then stream and compiled graph where
    // the memory records them.
    var GROUPINGS = av.groupings;
    var began = performance.now();
    var columns = av.t.length - 1;
    // Where each column's runs start, and its height in units.
    var startOf = new Array(columns), heightOf = new Array(columns), maxUnits = 1;
    for (var c = 0, p = 0; c < columns; c++) {
      startOf[c] = p;
      var count = av.runs[p], h = 0;
      for (var r = 0; r < count; r++) { h += av.runs[p + 2 + 2 * r]; }
      heightOf[c] = h; maxUnits = Math.max(maxUnits, h);
      p += 1 + 2 * count;
    }
    var axis = 'events', by = av.by || 0, z0 = 0, z1 = 1, chosen = -1;
    var colors = av.kept.map(function () { return ''; });
    function recolor() {
      av.kept.forEach(function (k, i) { colors[i] = shade(av.colors[k.g[by]], i); });
    }
    recolor();
    var controls = lib.htmlEl('div', 'controls');
    function picker(label, options, onChange) {
      var wrap = lib.htmlEl('label', null, label + ' ');
      var sel = lib.htmlEl('select');
      options.forEach(function (o, i) { var opt = lib.htmlEl('option', null, o); opt.value = String(i); sel.appendChild(opt); });
      sel.addEventListener('change', function () { onChange(+sel.value); });
      wrap.appendChild(sel);
      controls.appendChild(wrap);
      return sel;
    }
    picker('axis', ['events', 'time'], function (v) { axis = v === 0 ? 'events' : 'time'; draw(); });
    picker('colour by', GROUPINGS, function (v) { by = v; recolor(); draw(); legend(); }).value = String(by);
    var reset = lib.htmlEl('button', null, 'reset zoom');
    reset.type = 'button';
    reset.addEventListener('click', function () { setZoom(0, 1); });
    controls.appendChild(reset);
    container.appendChild(controls);
    var canvas = lib.htmlEl('canvas');
    container.appendChild(canvas);
    var ctx = canvas.getContext('2d');
    var L = 78, R = 10, T = 10, B = 22, W = 0, H = 0;
    // A column's extent on the chosen axis, as a fraction of the whole.
    var tSpan = Math.max(1, av.t[columns] - av.t[0]);
    function colFrac(c) { return axis === 'events' ? c / columns : (av.t[c] - av.t[0]) / tSpan; }
    function xOf(f) { return L + (f - z0) / (z1 - z0) * (W - L - R); }
    function fracOfX(x) { return z0 + (x - L) / (W - L - R) * (z1 - z0); }
    function yOf(u) { return H - B - u / maxUnits * (H - B - T); }
    // The part of the axis in view, kept inside [0, 1] and at least a
    // millionth wide; the page records it for the self-test.
    function setZoom(a, b) {
      var w = Math.min(1, Math.max(1e-6, b - a));
      a = Math.min(Math.max(0, a), 1 - w);
      z0 = a; z1 = a + w;
      container.setAttribute('data-zoom', z0.toFixed(6) + ' ' + z1.toFixed(6));
      draw();
    }
    function draw() {
      var dpr = window.devicePixelRatio || 1, rect = canvas.getBoundingClientRect();
      W = Math.max(200, Math.round(rect.width)); H = Math.max(120, Math.round(rect.height));
      canvas.width = W * dpr; canvas.height = H * dpr;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      var fg = getComputedStyle(container).color || '#333';
      ctx.save();
      ctx.beginPath(); ctx.rect(L, 0, W - L - R, H - B); ctx.clip();
      // One path per colour: a fillStyle change per run cost most of the
      // time on a page of 10^6 allocations.
      var paths = {}, order = [];
      function pathOf(style) {
        var p = paths[style];
        if (!p) { p = paths[style] = new Path2D(); order.push(style); }
        return p;
      }
      for (var c = 0; c < columns; c++) {
        var xa = xOf(colFrac(c)), xb = xOf(colFrac(c + 1));
        if (xb < L || xa > W - R) { continue; }
        var w = Math.max(1, xb - xa + 0.6), p = startOf[c], count = av.runs[p], u = 0;
        for (var r = 0; r < count; r++) {
          var band = av.runs[p + 1 + 2 * r], h = av.runs[p + 2 + 2 * r];
          var style = band === 0 ? 'rgba(140,140,140,.55)' : band - 1 === chosen ? fg : colors[band - 1];
          var y1 = yOf(u), y0 = yOf(u + h);
          pathOf(style).rect(xa, y0, w, Math.max(0.5, y1 - y0));
          u += h;
        }
      }
      order.forEach(function (style) { ctx.fillStyle = style; ctx.fill(paths[style]); });
      ctx.restore();
      ctx.fillStyle = fg; ctx.font = '11px system-ui, sans-serif';
      ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
      [0, 0.5, 1].forEach(function (f) { ctx.fillText(lib.fmtBytes(Math.round(f * maxUnits * av.unit)), L - 6, yOf(f * maxUnits)); });
      ctx.textBaseline = 'top';
      [0, 0.5, 1].forEach(function (f, i) {
        var frac = z0 + (z1 - z0) * f;
        ctx.textAlign = i === 0 ? 'left' : i === 2 ? 'right' : 'center';
        var text = axis === 'events' ? 'event #' + Math.round(frac * av.events) : lib.fmtX(m, av.t[0] + frac * tSpan);
        ctx.fillText(text, xOf(frac), H - B + 5);
      });
    }
    // The column and band under the pointer.
    function hit(ev) {
      var rect = canvas.getBoundingClientRect(), x = ev.clientX - rect.left, y = ev.clientY - rect.top;
      var f = fracOfX(x), c;
      if (axis === 'events') { c = Math.floor(f * columns); } else {
        c = 0; while (c + 1 < columns && colFrac(c + 1) <= f) { c++; }
      }
      if (c < 0 || c >= columns || x < L) { return null; }
      var p = startOf[c], count = av.runs[p], u = 0, units = (H - B - y) / (H - B - T) * maxUnits;
      for (var r = 0; r < count; r++) {
        var h = av.runs[p + 2 + 2 * r];
        if (units >= u && units < u + h) { return { column: c, band: av.runs[p + 1 + 2 * r], units: h }; }
        u += h;
      }
      return { column: c, band: -1 };
    }
    function describe(hitAt) {
      var c = hitAt.column;
      var lines = [axis === 'events' ? 'events #' + Math.floor(c * av.events / columns) + '–#' + Math.floor((c + 1) * av.events / columns) : lib.fmtX(m, av.t[c])];
      lines.push('column total ' + lib.fmtBytes(heightOf[c] * av.unit));
      if (hitAt.band === 0) { lines.push('smaller allocations, about ' + lib.fmtBytes(hitAt.units * av.unit)); }
      if (hitAt.band > 0) {
        var k = av.kept[hitAt.band - 1];
        lines[0] = lib.fmtBytes(k.b) + (k.shape ? ' · ' + k.shape : '');
        GROUPINGS.forEach(function (g, i) { lines.push(g + ': ' + av.keys[k.g[i]]); });
        lines.push('made at event ' + (k.made < 0 ? '(before the recording)' : '#' + k.made) + ', freed ' + (k.freed < 0 ? 'never' : 'at event #' + k.freed));
      }
      return lines;
    }
    var tip = lib.tooltip(container), drag = null;
    var stackBox = lib.htmlEl('div', 'stackview'); stackBox.hidden = true;
    var pan = null;
    canvas.addEventListener('mousemove', function (ev) {
      if (pan !== null) {
        var span = (z1 - z0) / Math.max(1, W - L - R);
        setZoom(pan.z0 - (ev.clientX - pan.x) * span, pan.z0 - (ev.clientX - pan.x) * span + (z1 - z0));
        return;
      }
      if (drag !== null) { return; }
      var h = hit(ev);
      if (!h || h.band < 0) { tip.hide(); return; }
      tip.show(describe(h), ev);
    });
    canvas.addEventListener('mouseleave', function () { tip.hide(); });
    canvas.addEventListener('mousedown', function (ev) {
      // Shift (or the middle button) drags the view along; a plain drag
      // picks the part to zoom into.
      if (ev.shiftKey || ev.button === 1) { pan = { x: ev.clientX, z0: z0 }; canvas.style.cursor = 'grabbing'; ev.preventDefault(); return; }
      drag = ev.clientX;
    });
    // A drag that ends outside the chart ends too (the chart's own mouseup
    // has run first when it ends inside).
    window.addEventListener('mouseup', function () { drag = null; if (pan !== null) { pan = null; canvas.style.cursor = ''; } });
    // The wheel zooms around the pointer; shift+wheel (or a sideways
    // swipe) pans. Zoomed out, a wheel away from the page scrolls it.
    canvas.addEventListener('wheel', function (ev) {
      var rect = canvas.getBoundingClientRect(), w = z1 - z0;
      var sideways = ev.shiftKey ? (ev.deltaY || ev.deltaX) : ev.deltaX;
      if (sideways && (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY))) {
        ev.preventDefault();
        var step = w * Math.max(-0.5, Math.min(0.5, sideways / 500));
        setZoom(z0 + step, z1 + step);
        return;
      }
      if (!ev.deltaY || (ev.deltaY > 0 && z0 <= 0 && z1 >= 1)) { return; }
      ev.preventDefault();
      var f = Math.min(1, Math.max(0, fracOfX(ev.clientX - rect.left)));
      var k = Math.pow(1.0015, Math.max(-300, Math.min(300, ev.deltaY)));
      setZoom(f - (f - z0) * k, f + (z1 - f) * k);
    }, { passive: false });
    canvas.addEventListener('mouseup', function (ev) {
      if (pan !== null) { return; }
      var from = drag; drag = null;
      if (from === null) { return; }
      var rect = canvas.getBoundingClientRect();
      if (Math.abs(ev.clientX - from) > 4) {
        var a = fracOfX(Math.min(from, ev.clientX) - rect.left), b = fracOfX(Math.max(from, ev.clientX) - rect.left);
        setZoom(Math.max(0, a), Math.min(1, b));
        return;
      }
      // A click: the allocation's whole stack.
      var h = hit(ev);
      chosen = h && h.band > 0 ? h.band - 1 : -1;
      draw();
      while (stackBox.firstChild) { stackBox.removeChild(stackBox.firstChild); }
      stackBox.hidden = chosen < 0;
      if (chosen < 0) { return; }
      // The stack as the drill-down keeps it (render/blocks.rs), library
      // frames greyed.
      var k = av.kept[chosen], bl = m.blocks, site = bl && k.site >= 0 ? bl.sites[k.site] : null;
      var frames = site ? site.stack : [];
      var head = site ? (frames.length ? 'stack, innermost first:' : 'no stack recorded') : 'stack not kept (the page keeps the stacks of the largest blocks\' sites)';
      if (site && site.before === 'freed') { head = 'allocation not recorded; stack of the free:'; }
      stackBox.appendChild(lib.htmlEl('div', null, lib.fmtBytes(k.b) + (k.shape ? ' ' + k.shape : '') + ' — ' + head));
      var ol = lib.htmlEl('ol', 'stack');
      frames.forEach(function (f) { var fr = bl.frames[f]; ol.appendChild(lib.htmlEl('li', fr[1] ? 'lib' : null, fr[0])); });
      stackBox.appendChild(ol);
    });
    canvas.addEventListener('dblclick', function () { setZoom(0, 1); });
    draw();
    if (window.ResizeObserver) {
      var last = Math.round(canvas.getBoundingClientRect().width);
      new ResizeObserver(function () { var w = Math.round(canvas.getBoundingClientRect().width); if (w !== last) { last = w; draw(); } }).observe(canvas);
    }
    container.appendChild(lib.htmlEl('div', 'hint', av.allocations + ' allocations in ' + columns + ' columns; the ' + av.kept.length +
      ' largest drawn as bands of their own, the rest between them in grey.'));
    var legendBox = lib.htmlEl('div', 'legend');
    container.appendChild(legendBox);
    // The groups of the tallest column (the replay's peak; the page's peak
    // too, unless the allocator's own figure put it elsewhere), every
    // allocation live there counted, merged ones too: they add up to the
    // column's total.
    function legend() {
      while (legendBox.firstChild) { legendBox.removeChild(legendBox.firstChild); }
      var rows = av.legend[by], shown = rows.slice(0, 12), rest = rows.slice(12);
      legendBox.appendChild(lib.htmlEl('span', 'item', 'at its highest, ' + lib.fmtBytes(av.top) + ', by ' + GROUPINGS[by] + ':'));
      shown.forEach(function (r) {
        var item = lib.htmlEl('span', 'item'); item.title = av.keys[r[0]];
        var sw = lib.htmlEl('span', 'swatch'); sw.style.background = av.colors[r[0]]; item.appendChild(sw);
        item.appendChild(document.createTextNode(av.keys[r[0]] + ' — ' + lib.fmtBytes(r[1])));
        legendBox.appendChild(item);
      });
      if (rest.length) {
        var sum = rest.reduce(function (a, r) { return a + r[1]; }, 0);
        legendBox.appendChild(lib.htmlEl('span', 'item', rest.length + ' more groups — ' + lib.fmtBytes(sum)));
      }
    }
    legend();
    container.appendChild(stackBox);
    container.setAttribute('data-columns', String(columns));
    // For the browser check: the milliseconds this view took to draw.
    container.setAttribute('data-draw-ms', String(Math.round(performance.now() - began)));
    lib.drew();
  }
  view.selfTest = selfTest;
  return view;
})();
