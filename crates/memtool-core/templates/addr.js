// memtool report: the address × time grid (render/addr.rs makes the data).
// Loaded before report.js, which calls memtoolAddrView with its helpers.
// Profile text is only ever put into the page with textContent, never as HTML.
var memtoolAddrView = (function () {
  'use strict';
  // The grid comes run-length coded (`120000.` for an empty one, `2A4.2B`):
  // a count before a cell code repeats it, so a memory with little in it
  // does not cost the page its 600 × 200 cells.
  function expandRuns(coded) {
    var parts = [], n = 0;
    for (var i = 0; i < coded.length; i++) {
      var c = coded.charCodeAt(i);
      if (c >= 48 && c <= 57) { n = n * 10 + (c - 48); continue; }
      parts.push(n > 1 ? coded.charAt(i).repeat(n) : coded.charAt(i));
      n = 0;
    }
    return parts.join('');
  }
  function addrView(container, m, lib) {
    var htmlEl = lib.htmlEl, fmtBytes = lib.fmtBytes, fmtX = lib.fmtX, tooltip = lib.tooltip;
    var liveAt = lib.liveAt, hexAddr = lib.hexAddr, madeText = lib.madeText;
    var a = m.addr;
    if (!a) { return; }
    var grid = expandRuns(a.grid);
    var colors = m.timeline.bands.map(function (b) { return b.color; });
    var canvas = htmlEl('canvas', 'addrgrid');
    canvas.width = a.cols; canvas.height = a.rows;
    canvas.style.aspectRatio = a.cols + ' / ' + Math.max(a.rows, a.cols / 4);
    var ctx = canvas.getContext('2d');
    function bandIndex(ch) {
      var c = ch.charCodeAt(0);
      if (c >= 65 && c <= 90) { return c - 65; }
      if (c >= 97 && c <= 122) { return c - 97 + 26; }
      return -1;
    }
    // One ImageData for the grid: a fillRect per cell took seconds on big pages.
    function rgb(hex) {
      var v = /^#([0-9a-f]{6})$/i.exec(hex || '');
      var x = v ? parseInt(v[1], 16) : 0x888888;
      return [(x >> 16) & 255, (x >> 8) & 255, x & 255];
    }
    var rgbs = colors.map(rgb), grey = rgb('#888888');
    var scheme = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
    var painted = 0;
    function paint() {
      ctx.fillStyle = scheme && scheme.matches ? '#1e2228' : '#f5f7fa';
      ctx.fillRect(0, 0, a.cols, a.rows);
      var img = ctx.getImageData(0, 0, a.cols, a.rows), px = img.data;
      painted = 0;
      for (var r = 0; r < a.rows; r++) {
        for (var c = 0; c < a.cols; c++) {
          var b = bandIndex(grid.charAt(r * a.cols + c));
          if (b < 0) { continue; }
          painted++;
          var col = rgbs[Math.min(b, rgbs.length - 1)] || grey, o = (r * a.cols + c) * 4;
          px[o] = col[0]; px[o + 1] = col[1]; px[o + 2] = col[2]; px[o + 3] = 255;
        }
      }
      ctx.putImageData(img, 0, 0);
    }
    paint();
    // The free cells' colour follows the page's scheme when it changes.
    if (scheme && scheme.addEventListener) { scheme.addEventListener('change', paint); }
    // The plot: addresses down the left (where each range starts), a line
    // where one range ends and the next begins, times along the bottom.
    var plot = htmlEl('div', 'addrplot');
    plot.appendChild(canvas);
    var labelled = -1;
    a.segments.forEach(function (seg, i) {
      var top = 100 * seg[2] / a.rows;
      if (i > 0) {
        var line = htmlEl('div', 'addrrange');
        line.style.top = top + '%';
        plot.appendChild(line);
      }
      // A label per range with room for it (a tenth of the height apart).
      if (labelled < 0 || seg[2] - labelled >= a.rows / 10) {
        var lab = htmlEl('div', 'addrlabel', '0x' + seg[0].toString(16));
        lab.style.top = top + '%';
        lab.title = '0x' + seg[0].toString(16) + '–0x' + seg[1].toString(16) + ' (' + fmtBytes(seg[1] - seg[0]) + ')';
        plot.appendChild(lab);
        labelled = seg[2];
      }
    });
    container.appendChild(plot);
    var times = htmlEl('div', 'addrtimes');
    [0, 0.5, 1].forEach(function (f) { times.appendChild(htmlEl('span', null, fmtX(m, a.x[0] + (a.x[1] - a.x[0]) * f))); });
    container.appendChild(times);
    // For the browser check: a canvas has no DOM to inspect.
    container.setAttribute('data-cells', String(painted));
    // The address a row shows (the middle of its bytes), and the listed
    // block there at a moment, if any.
    function addressOf(r) {
      var off = (r + 0.5) * a.span / a.rows, seg = null;
      for (var s = 0; s < a.segments.length; s++) { if (a.segments[s][3] <= off) { seg = a.segments[s]; } }
      if (!seg || off - seg[3] >= seg[1] - seg[0]) { return null; }
      return seg[0] + (off - seg[3]);
    }
    var bl = m.blocks, base = bl && bl.base ? parseInt(bl.base, 16) : null;
    function blockAt(addr, x) {
      if (base === null || addr === null) { return -1; }
      var off = addr - base, found = -1;
      for (var k = 0; k < bl.bytes.length; k++) {
        if (bl.addr[k] >= 0 && bl.addr[k] <= off && off < bl.addr[k] + Math.max(1, bl.bytes[k]) && liveAt(bl, x, k)) { found = k; }
      }
      return found;
    }
    var tip = tooltip(container);
    canvas.addEventListener('mousemove', function (ev) {
      var rect = canvas.getBoundingClientRect();
      var c = Math.floor((ev.clientX - rect.left) / rect.width * a.cols), r = Math.floor((ev.clientY - rect.top) / rect.height * a.rows);
      if (c < 0 || r < 0 || c >= a.cols || r >= a.rows) { tip.hide(); return; }
      var x = a.x[0] + (a.x[1] - a.x[0]) * c / Math.max(1, a.cols - 1);
      var addr = addressOf(r);
      var b = bandIndex(grid.charAt(r * a.cols + c));
      var lines = [fmtX(m, x) + (addr !== null ? ' · 0x' + Math.floor(addr).toString(16) : '')];
      var k = blockAt(addr, x);
      if (k >= 0) {
        var site = bl.site[k] >= 0 ? bl.sites[bl.site[k]] : null;
        lines.push(fmtBytes(bl.bytes[k]) + ' block at ' + hexAddr(bl, k) + ', ' + madeText(m, bl, k));
        var bk = m.timeline.bands[bl.band[k]];
        lines.push(bk ? bk.key : 'in use');
        if (site && site.op) { lines.push('op ' + site.op); }
      } else {
        var band = m.timeline.bands[Math.min(b, m.timeline.bands.length - 1)];
        lines.push(b < 0 ? 'free' : band ? band.key : 'in use');
      }
      tip.show(lines, ev);
    });
    canvas.addEventListener('mouseleave', function () { tip.hide(); });
    container.appendChild(htmlEl('div', 'hint', a.segments.length + ' address range(s) shown, ' + fmtBytes(a.span) + ' in all; rows top to bottom: low to high addresses.'));
    lib.drew();
  }
  return addrView;
})();
