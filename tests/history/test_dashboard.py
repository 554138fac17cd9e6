"""The static dashboard: a page per kernel with a chart per series, change points and acknowledgements marked, commits
linked from a trusted base only; what commits and people wrote is escaped text. And, where Chromium is installed, the
pages as a real browser renders them: each page loads, its charts have their points, every link resolves."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kforge_bot.history.changes import change_points
from kforge_bot.history.dashboard import CSP, page_name, write_site
from kforge_bot.history.report import HistoryReport
from kforge_bot.history.series import Point, Series

EVIL = ('<script>console.error("ran")</script><img src="x.png" onerror="console.error(1)"> @octocat '
        'https://evil.example')


def report() -> HistoryReport:
    s = Series("soft<max>", "soft<max>", "shape set 0 (n=64)", "cpu", "cpu-x", "relative", 0.03)
    values = [1.0 + 0.01 * ((i * 7) % 3 - 1) for i in range(10)] + [1.25 + 0.01 * ((i * 5) % 3 - 1) for i in range(10)]
    s.points = [Point(f"{i:040x}", EVIL if i == 10 else f"commit {i}", v, [v * 0.98, v * 1.02], v, 1.0,
                      {"torch": "2.13" if i < 15 else "2.14"}) for i, v in enumerate(values)]
    [change] = change_points(s)
    acks = {change.id: {"id": change.id, "by": "ada", "reason": EVIL}}
    changes = change_points(s, acks)
    return HistoryReport(s.points[-1].commit, [p.commit for p in s.points], [s], changes, acks)


def test_pages_escape_untrusted_text_and_link_commits_only_from_a_trusted_base(tmp_path) -> None:
    index = write_site(report(), tmp_path, "https://github.com/octo/kernels/commit")
    page = (tmp_path / page_name("soft<max>")).read_text()
    assert "<script>" not in page and "<script>" not in index.read_text()
    assert f'http-equiv="Content-Security-Policy" content="{CSP}"' in page and "script-src" not in CSP
    assert html.escape(EVIL) in page
    assert 'href="https://evil.example' not in page
    hrefs = re.findall(r'href="([^"]+)"', page)
    assert hrefs and all(h == "index.html" or re.fullmatch(r"https://github.com/octo/kernels/commit/[0-9a-f]{40}", h)
                         for h in hrefs)
    assert page.count('class="point"') == 20 and 'class="change"' in page and 'class="software"' in page
    assert "acknowledged by ada" in page
    unlinked = write_site(report(), tmp_path / "plain", "javascript:alert(1)")
    assert "javascript:" not in (unlinked.parent / page_name("soft<max>")).read_text()


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def render(page: Path, *extra: str) -> tuple[str, list[str]]:
    """The page as headless Chromium builds it (its DOM serialized), and every message it logged to its console
    (script errors, blocked loads, Content-Security-Policy violations)."""
    browser = chromium()
    assert browser is not None, "no Chromium on this CI runner: .ci/run installs Debian's chromium"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", *extra, page.as_uri()], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


# In CI a browser is installed (.ci/run): there the test runs or fails, never skips.
@pytest.mark.skipif(chromium() is None and os.environ.get("CI") != "true",
                    reason="Chromium is not installed (apt-get install chromium): the dashboard is not checked in a "
                           "browser here")
def test_the_dashboard_renders_in_headless_chromium(tmp_path) -> None:
    index = write_site(report(), tmp_path / "site", None)
    pages = [index, *sorted(p for p in index.parent.glob("kernel-*.html"))]
    assert len(pages) == 2
    shot = tmp_path / "shot.png"
    doms = []
    for page in pages:  # the kernel page's screenshot in the same browser run (a browser start is seconds)
        shoot = [f"--screenshot={shot}", "--window-size=1000,900"] if page == pages[1] else []
        dom, console = render(page, "--dump-dom", *shoot)
        assert console == [], f"{page.name} logged to the console: {console}"
        assert "<h1>" in dom and "<table>" in dom  # parsed and rendered, not a Chromium error page
        for href in re.findall(r'href="([^"#]+)"', dom):
            assert (page.parent / href).is_file(), f"{page.name} links to {href}, which is not there"
        doms.append(dom)
    kernel_dom = doms[1]
    assert kernel_dom.count("<svg") == 1 and kernel_dom.count('class="point"') == 20
    assert kernel_dom.count('class="change"') == 1
    # The commit's subject and the acknowledgement's reason are text in the built page, not elements.
    assert kernel_dom.count(html.escape(EVIL, quote=False)) == 3  # the change's row, the commit's row, the reason
    assert "<script" not in kernel_dom and "<img" not in kernel_dom
    assert shot.stat().st_size > 10_000  # an image with the chart in it, not a blank page
