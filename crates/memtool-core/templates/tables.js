// memtool report: the page's tables sorted by a click on a heading, filtered
// by the box above them, and folded to their top rows when long. Loaded
// before report.js, which applies them to every table.sortable with its
// helpers.
var memtoolTables = function (lib) {
  'use strict';
  var htmlEl = lib.htmlEl;
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

  // ---- long tables: the top rows, the rest behind a control -------------
  // A table of more than FOLDED_ROWS + 5 rows shows its top FOLDED_ROWS (in
  // the order it is sorted; CSS hides the rest) until asked; a filter shows
  // every row that matches.
  var FOLDED_ROWS = 20;
  function foldable(table) {
    var n = table.tBodies[0] ? table.tBodies[0].rows.length : 0;
    if (n <= FOLDED_ROWS + 5) { return; }
    var open = false;
    table.classList.add('folded');
    var more = htmlEl('button', 'unfold', 'show all ' + n + ' rows');
    more.type = 'button';
    var input = table.previousElementSibling;
    var filtering = function () { return input && input.classList.contains('filter') && input.value !== ''; };
    var refold = function () {
      table.classList.toggle('folded', !open && !filtering());
      more.textContent = open ? 'show the top ' + FOLDED_ROWS + ' rows' : 'show all ' + n + ' rows';
    };
    more.addEventListener('click', function () { open = !open; refold(); });
    if (input && input.classList.contains('filter')) { input.addEventListener('input', refold); }
    table.parentNode.insertBefore(more, table.nextSibling);
  }
  return { sortable: sortable, filterable: filterable, foldable: foldable };
};
