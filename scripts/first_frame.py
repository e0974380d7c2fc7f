#!/usr/bin/env python3
"""When each memtool page drew its first frame, in real time.

    scripts/first_frame.py CHROMIUM PAGE.html...

Prints one line per page: its name, the milliseconds from the start of
navigation to the first frame after the page's script finished (the page
writes `data-memtool-first-frame-ms` from `performance.now()`), and the
page's size in bytes; `?` where no frame came within 20 s. Each page opens
in a fresh headless Chromium driven over the DevTools protocol on a pipe
(`--remote-debugging-pipe`), in real time: `--dump-dom` may dump before the
frame, and virtual time does not read what a person waits. Standard library
only; the numbers are reported, not judged (machines differ).
"""

import json
import os
import subprocess
import sys
import tempfile
import time


class Browser:
    """A headless Chromium whose DevTools protocol runs over fds 3 and 4."""

    def __init__(self, chromium, url, profile_dir):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds():
            # Out of the way first: either pipe end may be fd 3 or 4 already.
            r, w = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-default-apps", "--no-first-run",
             f"--user-data-dir={profile_dir}", "--window-size=1300,2600",
             "--remote-debugging-pipe", url],
            pass_fds=(3, 4), preexec_fn=fds, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0

    def call(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self.buffer:
                chunk = os.read(self.from_browser, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def close(self):
        # Asked to close, Chromium ends its helper processes too, which
        # write into the profile directory until they have.
        try:
            self.call("Browser.close")
            self.process.wait(timeout=10)
        except (OSError, RuntimeError, subprocess.TimeoutExpired):
            os.killpg(self.process.pid, 9)
            self.process.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)


def attach_page(browser, url, deadline):
    """The DevTools session of the page at `url`, once the browser lists it;
    None when it does not by `deadline` (time.monotonic())."""
    while time.monotonic() < deadline:
        targets = browser.call("Target.getTargets")["targetInfos"]
        pages = [t for t in targets if t["type"] == "page" and t["url"] == url]
        if pages:
            return browser.call("Target.attachToTarget",
                                {"targetId": pages[0]["targetId"], "flatten": True})["sessionId"]
        time.sleep(0.05)
    return None


def first_frame_ms(chromium, page):
    url = "file://" + os.path.abspath(page)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile_dir:
        browser = Browser(chromium, url, profile_dir)
        try:
            deadline = time.monotonic() + 20
            session = attach_page(browser, url, deadline)
            if session is None:
                return None
            while time.monotonic() < deadline:
                value = browser.call("Runtime.evaluate", {
                    "expression": "document.documentElement && document.documentElement"
                                  ".getAttribute('data-memtool-first-frame-ms')",
                    "returnByValue": True}, session)["result"].get("value")
                if value is not None:
                    return int(value)
                time.sleep(0.05)
            return None
        finally:
            browser.close()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    chromium, pages = sys.argv[1], sys.argv[2:]
    for page in pages:
        name = os.path.basename(page)
        name = name[:-len(".html")] if name.endswith(".html") else name
        ms = first_frame_ms(chromium, page)
        print(name, "?" if ms is None else ms, os.path.getsize(page), flush=True)


if __name__ == "__main__":
    main()
