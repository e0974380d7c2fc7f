// memtool report: the page's self-test. Opened as report.html#memtool-selftest
// (the browser check does), report.js calls memtoolSelfTest once the charts
// are drawn: it drives the page's controls with synthetic events and records
// what happened in the root element's data-memtool-selftest attribute.
// `byDom` is the page's data, memory by memory, keyed by their data-mem.
function memtoolSelfTest(byDom) {
  'use strict';
  var results = [];
  function check(name, ok) { results.push(name + (ok ? ':ok' : ':FAIL')); }
  function mouse(target, type, x, y) {
    target.dispatchEvent(new MouseEvent(type, { bubbles: true, clientX: x, clientY: y, buttons: type === 'mouseup' ? 0 : 1 }));
  }
  // Before any control is touched: the first timeline shows its peak (an
  // opening zoomed to the activity must never leave the peak outside).
  var firstChart = document.querySelector('.timeline.chart');
  if (firstChart && firstChart.querySelector('svg')) {
    check('peakshown', firstChart.querySelector('circle.peak') !== null);
  }
  // Step lines: apart by report.js's STEP_GAP (8px) but where a label
  // needs its own line, whatever the number of steps (a run of thousands of
  // steps drew a line a pixel apart: stripes across the bands).
  var stepCharts = document.querySelectorAll('.timeline svg');
  var stepsChecked = false, stepsOk = true;
  Array.prototype.forEach.call(stepCharts, function (svg) {
    var xs = Array.prototype.map.call(svg.querySelectorAll('line.step'), function (l) { return parseFloat(l.getAttribute('x1')); });
    if (xs.length < 2) { return; }
    stepsChecked = true;
    xs.sort(function (a, b) { return a - b; });
    var close = 0;
    for (var i = 1; i < xs.length; i++) { if (xs[i] - xs[i - 1] < 8 - 1e-6) { close++; } }
    if (close > svg.querySelectorAll('text.steplabel').length) { stepsOk = false; }
  });
  if (stepsChecked) { check('steplines', stepsOk); }
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
  // With blocks, a click on a frame lists those under it at the peak (the
  // largest frame under the root: the page lists the largest blocks), on
  // the root those of the whole tree.
  var tf = document.querySelector('.flame[data-mem]');
  var fm = tf && byDom[tf.getAttribute('data-mem')], treeDrill = tf && tf.nextElementSibling;
  if (fm && fm.blocks && treeDrill && treeDrill.classList.contains('drill') && tf.querySelectorAll('.fn').length > 1) {
    var rowsNow = function () { return treeDrill.querySelectorAll('table.blocks tbody tr').length; };
    tf.querySelectorAll('.fn')[1].click();
    var picked = rowsNow();
    tf.querySelector('.fn.anc').click();
    check('tree', picked > 0 && rowsNow() >= picked);
  }
  // The address view: its ranges named down the left, times along the
  // bottom, and a tooltip over a cell.
  var addr = document.querySelector('.addr[data-mem] canvas.addrgrid');
  if (addr) {
    var holder = addr.parentNode.parentNode;
    var ar = addr.getBoundingClientRect();
    mouse(addr, 'mousemove', ar.left + ar.width / 2, ar.top + ar.height / 2);
    var shown = holder.querySelector('.tooltip');
    check('addr', holder.querySelectorAll('.addrlabel').length > 0 &&
      holder.querySelectorAll('.addrtimes span').length === 3 && shown && !shown.hidden && shown.textContent.length > 0);
  }
  // Drill-down: a click on the band under the peak lists its blocks; a
  // click on the first lists its stack.
  var tlc = document.querySelector('.timeline.chart');
  var tm = tlc && byDom[tlc.getAttribute('data-mem')];
  if (tlc && tm && tm.blocks) {
    var mark = tlc.querySelector('circle.peak');
    var t = tm.timeline, pc = t.hi.indexOf(Math.max.apply(null, t.hi));
    if (mark) {
      var mr = mark.getBoundingClientRect();
      var cy = mr.top + mr.height / 2 + 6;
      mouse(mark.ownerSVGElement, 'mousedown', mr.left + mr.width / 2, cy);
      mouse(mark.ownerSVGElement, 'mouseup', mr.left + mr.width / 2, cy);
    }
    var rows = tlc.querySelectorAll('.drill table.blocks tbody tr');
    if (rows.length === 0) {
      // The peak mark sits on a sliver: ask for the biggest band there.
      var big = 0;
      t.bands.forEach(function (b, k) { if (b.v[pc] > t.bands[big].v[pc]) { big = k; } });
      tlc.memtoolShow(pc, big);
      rows = tlc.querySelectorAll('.drill table.blocks tbody tr');
    }
    check('drill', rows.length > 0);
    if (rows.length) {
      rows[0].click();
      var sv = tlc.querySelector('.drill .stackview');
      check('stack', sv !== null && (sv.querySelectorAll('li').length > 0 || sv.textContent.indexOf('no stack') >= 0));
    }
  }
  // The allocation view and a compiled program's charts (alloc.js, program.js).
  memtoolAllocView.selfTest(check);
  memtoolProgramChart.selfTest(check);
  var stv = document.querySelector('.state[data-mem]');
  if (stv) {
    var slider = stv.querySelector('input[type=range]');
    slider.value = '0'; slider.dispatchEvent(new Event('input'));
    slider.value = slider.max; slider.dispatchEvent(new Event('input'));
    var segs = stv.querySelector('.segments');
    var blk = stv.querySelector('rect.block');
    var okState = segs && +segs.getAttribute('data-segments') > 0;
    if (blk) {
      blk.dispatchEvent(new MouseEvent('click', { bubbles: true }));
      okState = okState && stv.querySelector('.stackview') !== null;
    }
    check('state', okState);
  }
  document.documentElement.setAttribute('data-memtool-selftest', results.join(' '));
}
