#!/usr/bin/env python3
"""A picture of a memtool page's allocation view, to set beside memory_viz's
Active Memory Timeline of the same file (docs/memory-viz.md).

    scripts/alloc_screenshot.py CHROMIUM PAGE.html OUT.png [WIDTH [HEIGHT]]

Opens the page in headless Chromium over the DevTools protocol
(first_frame.py's Browser) in a window WIDTH px wide (1,400 by default),
waits for its script, makes the first memory's allocation view's chart
HEIGHT px tall (470 by default: memory_viz's plot in a 1,400 × 900 window)
and saves that view (its title, controls, chart and note) as a PNG.
Standard library only.
"""

import base64
import json
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from first_frame import Browser, attach_page  # noqa: E402

# The first allocation view's canvas made HEIGHT px tall (its resize
# observer redraws it).
RESIZE = r"""
(function (height) {
  var view = document.querySelector('.allocview');
  if (!view || !view.querySelector('canvas')) { return false; }
  view.querySelector('canvas').style.height = height + 'px';
  var w = view.querySelector('canvas').getBoundingClientRect().width;
  view.querySelector('canvas').style.width = (w - 1) + 'px';
  return true;
})(%d)
"""
# Then the box of the view with its heading, a few pixels round it.
LOCATE = r"""
(function () {
  var view = document.querySelector('.allocview');
  var head = view.previousElementSibling;
  while (head && !/^H[1-6]$/.test(head.tagName) && head.previousElementSibling) { head = head.previousElementSibling; }
  var r = view.getBoundingClientRect(), h = head ? head.getBoundingClientRect() : r;
  var top = Math.min(h.top, r.top) - 4, left = Math.max(0, r.left - 6);
  return JSON.stringify({x: left + window.scrollX, y: top + window.scrollY,
                         w: r.right + 6 - left, h: r.bottom + 4 - top});
})()
"""


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip().splitlines()[4].strip())
    chromium, page, out = sys.argv[1], sys.argv[2], sys.argv[3]
    width = int(sys.argv[4]) if len(sys.argv) > 4 else 1400
    height = int(sys.argv[5]) if len(sys.argv) > 5 else 470
    url = "file://" + os.path.abspath(page)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile_dir:
        browser = Browser(chromium, url, profile_dir)
        try:
            deadline = time.monotonic() + 30
            session = attach_page(browser, url, deadline)
            if session is None:
                sys.exit(f"{page}: the browser did not open it")
            browser.call("Emulation.setDeviceMetricsOverride",
                         {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session)
            box = None
            while time.monotonic() < deadline:
                ready = browser.call("Runtime.evaluate", {
                    "expression": "document.documentElement.getAttribute('data-memtool')",
                    "returnByValue": True}, session)["result"].get("value")
                if ready == "ready":
                    box = browser.call("Runtime.evaluate", {"expression": RESIZE % height, "returnByValue": True},
                                       session)["result"].get("value")
                    break
                time.sleep(0.1)
            if not box:
                sys.exit(f"{page}: no allocation view")
            time.sleep(0.5)  # the redraw after the resize
            b = json.loads(browser.call("Runtime.evaluate", {"expression": LOCATE, "returnByValue": True},
                                        session)["result"]["value"])
            shot = browser.call("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": b["x"], "y": b["y"], "width": b["w"], "height": b["h"], "scale": 1}}, session)
            with open(out, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
            print(f"{out}: {round(b['w'])} x {round(b['h'])}")
        finally:
            browser.close()


if __name__ == "__main__":
    main()
