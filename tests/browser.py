"""A page as headless Chromium renders it: its visible text, its tables, its links, a screenshot.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: file descriptors 3 and
4, messages of JSON ended by NUL), so that nothing but Debian's ``chromium`` is needed. What the tests read is
what a reader sees: ``innerText`` (text in a closed ``<details>`` or hidden by CSS is not there), each table's
rows as their cells' text, the links' targets.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# What the page shows: the text, every table (rows of cells' text, with the row's class), every link's target.
READ_PAGE = """(() => ({
  text: document.body.innerText,
  tables: Array.from(document.querySelectorAll('table')).map(t => ({
    heading: (t.closest('details') && !t.closest('details').open) ? null :
             (t.previousElementSibling ? t.previousElementSibling.innerText : ''),
    rows: Array.from(t.rows).map(r => ({cls: r.className, header: Array.from(r.cells).every(c => c.tagName == 'TH'),
                                        cells: Array.from(r.cells).map(c => c.innerText)}))})),
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href')),
  width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight,
}))()"""


class Browser:
    """One headless Chromium for a test module: ``read(path)`` and ``screenshot(path, png)``."""

    def __init__(self) -> None:
        if CHROMIUM is None:
            raise RuntimeError("no chromium on PATH")
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        commands, self.to_browser = os.pipe()
        self.from_browser, replies = os.pipe()

        def pipes_as_3_and_4() -> None:
            read, write = os.dup(commands), os.dup(replies)   # dup2 onto itself would keep close-on-exec
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
             "--user-data-dir=%s" % self.profile, "about:blank"],
            close_fds=False, preexec_fn=pipes_as_3_and_4, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands)
        os.close(replies)
        self.pending = b""
        self.last_id = 0

    def call(self, method: str, session: Optional[str] = None, **params: Any) -> Dict[str, Any]:
        self.last_id += 1
        message: Dict[str, Any] = {"id": self.last_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self.pending:
                chunk = os.read(self.from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium ended while answering %s" % method)
                self.pending += chunk
            raw, self.pending = self.pending.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.last_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply["result"]

    def open(self, path: str, width: int = 1280, height: int = 1600) -> Tuple[str, str]:
        """A new tab showing ``path``, loaded: its target and session ids."""
        target = self.call("Target.createTarget", url="file://%s" % os.path.abspath(path))["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1,
                  mobile=False)
        loaded = "location.protocol == 'file:' && document.readyState == 'complete'"
        while not self.evaluate(session, loaded):
            time.sleep(0.05)
        return target, session

    def evaluate(self, session: str, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
        if "exceptionDetails" in answer:
            raise RuntimeError("the page's script failed: %s" % answer["exceptionDetails"])
        return answer["result"].get("value")

    def read(self, path: str, width: int = 1280) -> Dict[str, Any]:
        """{text, tables: [{heading, rows: [{cls, cells}]}], links, width, height} of the page as rendered."""
        target, session = self.open(path, width)
        try:
            return self.evaluate(session, READ_PAGE)
        finally:
            self.call("Target.closeTarget", targetId=target)

    def screenshot(self, path: str, png: str, width: int = 1280, height: Optional[int] = None,
                   top: int = 0) -> Dict[str, Any]:
        """The page (all of it, or ``height`` pixels from ``top``) as a PNG file; returns what ``read`` does."""
        target, session = self.open(path, width)
        try:
            page = self.evaluate(session, READ_PAGE)
            shot = self.call("Page.captureScreenshot", session, format="png", captureBeyondViewport=True,
                             clip={"x": 0, "y": top, "width": width, "height": height or page["height"] - top,
                                   "scale": 1})
            with open(png, "wb") as handle:
                handle.write(base64.b64decode(shot["data"]))
            return page
        finally:
            self.call("Target.closeTarget", targetId=target)

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        self.process.wait()
        for fd in (self.to_browser, self.from_browser):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


def table_rows(page: Dict[str, Any], heading_word: str) -> List[List[str]]:
    """The data rows (no header) of the first table whose heading (the element before it) has ``heading_word``."""
    for table in page["tables"]:
        if table["heading"] and heading_word in table["heading"]:
            return [row["cells"] for row in table["rows"] if not row["header"]]
    raise AssertionError("no table under a heading with %r: %s" % (heading_word, [t["heading"] for t in page["tables"]]))
