// memtool report: a compiled program's buffers drawn as XProf's Memory
// Viewer draws them (render/program_chart.rs makes the data). Loaded before
// report.js, which calls memtoolProgramChart with its helpers. Profile text
// is only ever put into the page with textContent, never as HTML.
var memtoolProgramChart = (function () {
  'use strict';
  // Neighbours read apart: buffers take hues a golden angle apart in the
  // order they were allocated; ops take a hue from their name.
  function hueOfIndex(i) { return (i * 137.508) % 360; }
  function hueOfText(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) { h = Math.imul(h ^ s.charCodeAt(i), 16777619); }
    return (h >>> 0) % 360;
  }
  function colorOf(block, i, by) {
    var hue = by === 'op' ? hueOfText(block.opcode || block.category || '?') : hueOfIndex(i);
    return 'hsl(' + hue.toFixed(0) + ',60%,' + (by === 'op' ? 62 : 58) + '%)';
  }
  function describe(lib, b) {
    var lines = [b.name || '(unnamed buffer)', lib.fmtBytes(b.b) + (b.u < b.b ? ' (' + lib.fmtBytes(b.b - b.u) + ' padding)' : '')];
    if (b.shape) { lines.push('shape ' + b.shape); }
    if (b.opcode) { lines.push('opcode ' + b.opcode + (b.category ? ' · ' + b.category : '')); } else if (b.category) { lines.push(b.category); }
    if (b.op) { lines.push('op ' + b.op); }
    if (b.source) { lines.push('source ' + b.source); }
    lines.push('live #' + b.s + '–#' + (b.e - 1) + ', offset ' + lib.fmtBytes(b.o));
    return lines;
  }
  // Round steps for an axis: 1, 2 or 5 × a power of ten (of 1024 for bytes).
  function ticks(max, count, base) {
    if (max <= 0) { return [0]; }
    var raw = max / count, unit = 1;
    while (unit * base <= raw) { unit *= base; }
    var step = [1, 2, 5, 10].map(function (m) { return m * unit; }).find(function (s) { return s >= raw; }) || unit * 10;
    var out = [];
    for (var v = 0; v <= max + 1e-9; v += step) { out.push(v); }
    return out;
  }

  // Opened as #memtool-selftest: the blocks drawn, and a bar at the peak
  // names its buffer on hover.
  function selfTest(check) {
    var bar = document.querySelector('.progpeak .bar');
    if (!bar) { return; }
    var r = bar.getBoundingClientRect();
    bar.dispatchEvent(new MouseEvent('mouseenter', { clientX: r.left + 5, clientY: r.top + 2 }));
    bar.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: r.left + 5, clientY: r.top + 2 }));
    var tip = bar.parentNode.querySelector('.tooltip');
    check('program', +document.querySelector('.progchart').getAttribute('data-blocks') > 0 && tip && !tip.hidden && tip.textContent.length > 0);
  }

  function chart(container, peakBars, m, lib) {
    var pc = m && m.program;
    if (!pc) { return; }
    var blocks = pc.blocks, by = 'buffer', chosen = -1;
    var controls = lib.htmlEl('div', 'controls', 'colour by ');
    var select = lib.htmlEl('select');
    [['buffer', 'buffer'], ['op', 'opcode']].forEach(function (o) {
      var opt = lib.htmlEl('option', null, o[1]); opt.value = o[0]; select.appendChild(opt);
    });
    controls.appendChild(select);
    container.appendChild(controls);
    var canvas = lib.htmlEl('canvas');
    container.appendChild(canvas);
    var ctx = canvas.getContext('2d');
    var L = 78, R = 10, T = 16, B = 22; // margins: offsets left, positions below
    var W = 0, H = 0;
    function px(x) { return L + (x - pc.x[0]) / Math.max(1, pc.x[1] - pc.x[0]) * (W - L - R); }
    function py(o) { return H - B - o / Math.max(1, pc.span) * (H - B - T); }
    function draw() {
      var dpr = window.devicePixelRatio || 1, rect = canvas.getBoundingClientRect();
      W = Math.max(200, Math.round(rect.width)); H = Math.max(120, Math.round(rect.height));
      canvas.width = W * dpr; canvas.height = H * dpr;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      var style = getComputedStyle(container);
      var fg = style.color || '#333';
      ctx.clearRect(0, 0, W, H);
      ctx.font = '11px system-ui, sans-serif';
      ctx.lineWidth = 1;
      // Offsets up the left, positions along the bottom.
      ctx.fillStyle = fg; ctx.strokeStyle = 'rgba(128,128,128,.25)';
      ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
      ticks(pc.span, 5, 1024).forEach(function (v) {
        var y = py(v);
        ctx.beginPath(); ctx.moveTo(L, y + 0.5); ctx.lineTo(W - R, y + 0.5); ctx.stroke();
        ctx.fillText(lib.fmtBytes(v), L - 6, y);
      });
      ctx.textAlign = 'center'; ctx.textBaseline = 'top';
      var n = pc.x[1] - pc.x[0];
      ticks(n, 8, 10).forEach(function (v) {
        var x = px(pc.x[0] + v);
        if (x > W - R - 10) { return; }
        ctx.fillText('#' + (pc.x[0] + v), x, H - B + 5);
      });
      // The blocks, with borders so that neighbours of one colour read apart.
      ctx.strokeStyle = 'rgba(0,0,0,.55)';
      blocks.forEach(function (b, i) {
        var x0 = px(b.s), x1 = px(b.e), y0 = py(b.o + b.b), y1 = py(b.o);
        ctx.fillStyle = colorOf(b, i, by);
        ctx.fillRect(x0, y0, Math.max(1, x1 - x0), Math.max(1, y1 - y0));
        if (x1 - x0 > 3 && y1 - y0 > 3) { ctx.strokeRect(x0 + 0.5, y0 + 0.5, x1 - x0 - 1, y1 - y0 - 1); }
      });
      if (chosen >= 0) {
        var c = blocks[chosen];
        ctx.lineWidth = 2.5; ctx.strokeStyle = fg;
        ctx.strokeRect(px(c.s), py(c.o + c.b), Math.max(2, px(c.e) - px(c.s)), Math.max(2, py(c.o) - py(c.o + c.b)));
        ctx.lineWidth = 1;
      }
      // The peak position.
      var xp = px(pc.peak_at) + 0.5;
      ctx.strokeStyle = '#c0392b'; ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(xp, T - 4); ctx.lineTo(xp, H - B); ctx.stroke();
      ctx.lineWidth = 1;
      ctx.fillStyle = '#c0392b'; ctx.textBaseline = 'top';
      var label = 'peak ' + lib.fmtBytes(pc.peak_bytes) + ' at #' + pc.peak_at;
      ctx.textAlign = xp > W / 2 ? 'right' : 'left';
      ctx.fillText(label, xp + (xp > W / 2 ? -4 : 4), 2);
    }
    function blockAt(ev) {
      var r = canvas.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
      for (var i = blocks.length - 1; i >= 0; i--) {
        var b = blocks[i];
        if (x >= px(b.s) - 0.5 && x <= Math.max(px(b.e), px(b.s) + 1) + 0.5 && y >= py(b.o + b.b) - 0.5 && y <= py(b.o) + 0.5) { return i; }
      }
      return -1;
    }
    var tip = lib.tooltip(container);
    canvas.addEventListener('mousemove', function (ev) {
      var i = blockAt(ev);
      if (i < 0) { tip.hide(); return; }
      tip.show(describe(lib, blocks[i]), ev);
    });
    canvas.addEventListener('mouseleave', function () { tip.hide(); });
    select.addEventListener('change', function () { by = select.value; draw(); drawBars(); });
    draw();
    if (window.ResizeObserver) {
      var last = Math.round(canvas.getBoundingClientRect().width);
      new ResizeObserver(function () { var w = Math.round(canvas.getBoundingClientRect().width); if (w !== last) { last = w; draw(); } }).observe(canvas);
    }
    var note = pc.blocks.length + ' buffers drawn';
    if (pc.omitted > 0) { note += '; ' + pc.omitted + ' smaller ones (' + lib.fmtBytes(pc.omitted_bytes) + ' in all) left out'; }
    container.appendChild(lib.htmlEl('div', 'hint', note + '.'));
    // For the browser check: a canvas has no DOM to inspect.
    container.setAttribute('data-blocks', String(blocks.length));
    lib.drew();

    // The buffers live at the peak, largest first.
    var BARS = 30;
    var live = [];
    blocks.forEach(function (b, i) { if (b.peak) { live.push(i); } });
    live.sort(function (a, b) { return blocks[b].b - blocks[a].b || a - b; });
    var rows = [];
    function drawBars() {
      rows.forEach(function (r) { r.fill.style.background = colorOf(blocks[r.i], r.i, by); });
    }
    if (!peakBars) { return; }
    var largest = live.length ? blocks[live[0]].b : 1;
    var barTip = lib.tooltip(peakBars);
    live.slice(0, BARS).forEach(function (i) {
      var b = blocks[i], row = lib.htmlEl('div', 'bar');
      var name = lib.htmlEl('span', 'name', b.name + (b.shape ? ' ' + b.shape : ''));
      var track = lib.htmlEl('span'), fill = lib.htmlEl('span', 'fill');
      fill.style.display = 'block';
      fill.style.width = (100 * b.b / Math.max(1, largest)).toFixed(2) + '%';
      track.appendChild(fill);
      row.appendChild(name); row.appendChild(track); row.appendChild(lib.htmlEl('span', 'size', lib.fmtBytes(b.b)));
      row.addEventListener('mousemove', function (ev) { barTip.show(describe(lib, b), ev); });
      row.addEventListener('mouseenter', function () { chosen = i; row.classList.add('chosen'); draw(); });
      row.addEventListener('mouseleave', function () { chosen = -1; row.classList.remove('chosen'); barTip.hide(); draw(); });
      peakBars.appendChild(row);
      rows.push({ i: i, fill: fill });
    });
    drawBars();
    var total = live.reduce(function (s, i) { return s + blocks[i].b; }, 0);
    var rest = live.slice(BARS).reduce(function (s, i) { return s + blocks[i].b; }, 0);
    peakBars.appendChild(lib.htmlEl('div', 'hint', live.length + ' buffers live at the peak, ' + lib.fmtBytes(total) + ' in all' +
      (live.length > BARS ? '; the ' + (live.length - BARS) + ' smallest (' + lib.fmtBytes(rest) + ') not shown.' : '.')));
    peakBars.setAttribute('data-live', String(live.length));
    lib.drew();
  }
  chart.selfTest = selfTest;
  return chart;
})();
