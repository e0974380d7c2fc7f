#!/usr/bin/env python3
"""Whether each memtool page fits the window it is read in.

    scripts/page_fit.py CHROMIUM PAGE.html...

Opens each page in a fresh headless Chromium over the DevTools protocol
(first_frame.py's Browser), at 1,400 and at 850 px wide (1,000 px high),
waits for the page's script, and measures in the page: its width against
the window's, its height in screens against 8 per memory drawn, and the
labels of each chart (an SVG's texts, the address view's range labels)
whose boxes overlap another's by more than a pixel each way, and the
legends against what they count (a timeline legend's bytes at the peak
against the "Live at peak" rows of its group, the allocation view's
groups against its peak). Prints one
line per page and width, `ok` or what failed; exits 1 when any failed.
Standard library only.
"""

import json
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from first_frame import Browser, attach_page  # noqa: E402

WIDTHS = (1400, 850)
HEIGHT = 1000
SCREENS_PER_MEMORY = 8

MEASURE = r"""
(function () {
  var d = document.documentElement, W = window.innerWidth, H = window.innerHeight;
  var memories = document.querySelectorAll('section.memory').length;
  var overlaps = [];
  var groups = [];
  document.querySelectorAll('svg').forEach(function (svg) { groups.push(Array.prototype.slice.call(svg.querySelectorAll('text'))); });
  document.querySelectorAll('.addrplot').forEach(function (p) { groups.push(Array.prototype.slice.call(p.querySelectorAll('.addrlabel'))); });
  groups.forEach(function (labels) {
    var boxes = labels.map(function (l) { return { t: l.textContent, r: l.getBoundingClientRect() }; })
      .filter(function (b) { return b.r.width > 0 && b.r.height > 0 && b.t.trim() !== ''; });
    for (var i = 0; i < boxes.length; i++) {
      for (var j = i + 1; j < boxes.length; j++) {
        var a = boxes[i].r, b = boxes[j].r;
        var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 1) { overlaps.push(boxes[i].t.slice(0, 40) + ' | ' + boxes[j].t.slice(0, 40)); }
      }
    }
  });
  // What sticks out: the outermost elements past the window's right edge.
  var wide = [];
  if (d.scrollWidth > W) {
    document.querySelectorAll('body, body *').forEach(function (e) {
      var r = e.getBoundingClientRect(), p = e.parentElement.getBoundingClientRect();
      if (r.width > 0 && r.right > W + 1 && p.right <= W + 1 && wide.length < 3) {
        wide.push(e.tagName.toLowerCase() + (e.className && e.className.baseVal === undefined ? '.' + e.className : '') +
          ' "' + e.textContent.trim().slice(0, 40) + '" (' + Math.round(r.right) + ' px)');
      }
    });
    // Text past its box's edge (a cell that does not wrap): the innermost
    // elements whose content runs past the window.
    if (wide.length === 0) {
      // Clipped text (overflow hidden, an ellipsis) widens nothing; SVG
      // elements have no scroll width.
      var past = function (e) {
        return !(e instanceof SVGElement) && getComputedStyle(e).overflowX === 'visible' &&
          e.getBoundingClientRect().left + e.scrollWidth > W + 1;
      };
      document.querySelectorAll('body *').forEach(function (e) {
        if (wide.length < 3 && past(e) && !Array.prototype.some.call(e.children, past)) {
          wide.push(e.tagName.toLowerCase() + (e.className && e.className.baseVal === undefined ? '.' + e.className : '') +
            ' "' + e.textContent.trim().slice(0, 40) + '" (text to ' + Math.round(e.getBoundingClientRect().left + e.scrollWidth) + ' px)');
        }
      });
    }
  }
  // Legends that count what the rows count: each timeline legend entry's
  // bytes at the peak against the "Live at peak" rows of that group (where
  // no rows are left out), and the allocation view's groups against its
  // peak. Both are printed rounded: allowed half their last digit each.
  var legends = [];
  var units = { B: 1, KiB: 1024, MiB: 1048576, GiB: 1073741824, TiB: 1099511627776 };
  function bytesOf(t) {
    var v = /(-?[\d.]+) (B|KiB|MiB|GiB|TiB)/.exec(t);
    return v ? { b: +v[1] * units[v[2]], slack: v[2] === 'B' ? 0.5 : 0.0051 * units[v[2]] } : null;
  }
  document.querySelectorAll('section.memory').forEach(function (sec) {
    var name = ((sec.querySelector('h2') || {}).textContent || '?').slice(0, 40);
    var table = sec.querySelector('table.breakdown');
    if (table && !sec.querySelector('p.omitted')) {
      var rows = {};
      table.querySelectorAll('tbody tr').forEach(function (tr) {
        var k = tr.cells[0].title;
        rows[k] = (rows[k] || 0) + (+tr.cells[1].getAttribute('data-v'));
      });
      sec.querySelectorAll('.timeline .legend span.item').forEach(function (e) {
        var t = e.textContent, at = t.lastIndexOf(' — '), v = at < 0 ? null : bytesOf(t.slice(at));
        if (!v || !/ at peak$/.test(t)) { return; }
        var got = rows[e.title] || 0;
        if (Math.abs(got - v.b) > v.slack) { legends.push(name + ': timeline legend ' + t.trim() + ', rows ' + got + ' B'); }
      });
    }
    var items = sec.querySelectorAll('.allocview .legend span.item');
    if (items.length > 1) {
      var top = bytesOf(items[0].textContent), sum = 0, slack = top ? top.slack : 0;
      for (var i = 1; i < items.length; i++) {
        var t = items[i].textContent, v = bytesOf(t.slice(t.lastIndexOf(' — ')));
        if (v) { sum += v.b; slack += v.slack; }
      }
      if (!top || Math.abs(sum - top.b) > slack) { legends.push(name + ': allocation legend adds up to ' + sum + ' B, not ' + items[0].textContent); }
    }
  });
  return JSON.stringify({ wide: wide, width: d.scrollWidth, window: W, height: d.scrollHeight, screen: H,
    memories: memories, overlaps: overlaps, legends: legends, ready: d.getAttribute('data-memtool') });
})()
"""


def measure(chromium, page, width):
    url = "file://" + os.path.abspath(page)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile_dir:
        browser = Browser(chromium, url, profile_dir)
        try:
            deadline = time.monotonic() + 30
            session = attach_page(browser, url, deadline)
            if session is None:
                return None
            browser.call("Emulation.setDeviceMetricsOverride",
                         {"width": width, "height": HEIGHT, "deviceScaleFactor": 1,
                          "mobile": False}, session)
            while time.monotonic() < deadline:
                value = browser.call("Runtime.evaluate", {
                    "expression": "document.documentElement && document.documentElement"
                                  ".getAttribute('data-memtool-first-frame-ms')",
                    "returnByValue": True}, session)["result"].get("value")
                if value is not None:
                    break
                time.sleep(0.05)
            else:
                return None
            # Charts drawn at the window's width redraw on resize: a frame later.
            time.sleep(0.3)
            value = browser.call("Runtime.evaluate", {"expression": MEASURE, "returnByValue": True},
                                 session)["result"].get("value")
            return json.loads(value) if value else None
        finally:
            browser.close()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    chromium, pages = sys.argv[1], sys.argv[2:]
    failed = False
    for page in pages:
        name = os.path.basename(page)
        name = name[:-len(".html")] if name.endswith(".html") else name
        for width in WIDTHS:
            m = measure(chromium, page, width)
            if m is None:
                print(f"{name} @{width}: FAIL: no page or no frame within 30 s", flush=True)
                failed = True
                continue
            problems = []
            if m["width"] > m["window"]:
                problems.append(f"{m['width']} px wide in a {m['window']} px window"
                                + (" (" + "; ".join(m["wide"]) + ")" if m["wide"] else ""))
            screens = m["height"] / m["screen"]
            allowed = SCREENS_PER_MEMORY * max(1, m["memories"])
            if screens > allowed:
                problems.append(f"{screens:.1f} screens tall for {m['memories']} memories (at most {allowed})")
            if m["overlaps"]:
                shown = "; ".join(m["overlaps"][:5])
                problems.append(f"{len(m['overlaps'])} overlapping label pair(s): {shown}")
            if m["legends"]:
                problems.append(f"{len(m['legends'])} legend(s) not counting what the rows count: "
                                + "; ".join(m["legends"][:3]))
            failed = failed or bool(problems)
            print(f"{name} @{width}: " + ("FAIL: " + " · ".join(problems) if problems else
                                          f"ok ({m['width']} px, {screens:.1f} screens)"), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
