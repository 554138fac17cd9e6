"""The static dashboard: a page per kernel with a chart per series, change points and acknowledgements marked, commits
linked from a trusted base only; what commits and people wrote is escaped text. And, where Chromium is installed, the
pages as a real browser renders them: each page loads, its charts have their points, every link resolves."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kforge_bot.history.changes import change_points
from kforge_bot.history.dashboard import page_name, write_site
from kforge_bot.history.report import HistoryReport
from kforge_bot.history.series import Point, Series

EVIL = '<script>alert(1)</script> @octocat https://evil.example'


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
    assert "&lt;script&gt;alert(1)&lt;/script&gt; @octocat https://evil.example" in page
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


@pytest.mark.skipif(chromium() is None, reason="Chromium is not installed (apt-get install chromium): the dashboard "
                                              "is not checked in a browser here")
def test_the_dashboard_renders_in_headless_chromium(tmp_path) -> None:
    index = write_site(report(), tmp_path / "site", None)
    pages = [index, *sorted(p for p in index.parent.glob("kernel-*.html"))]
    for page in pages:
        proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                               page.as_uri()], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        dom = proc.stdout
        assert "<h1>" in dom  # parsed and rendered, not a Chromium error page
        for href in re.findall(r'href="([^"#]+)"', dom):
            assert (page.parent / href).is_file(), f"{page.name} links to {href}, which is not there"
    kernel_dom = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                                 pages[1].as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert kernel_dom.count('class="point"') == 20 and "<svg" in kernel_dom
    shot = tmp_path / "shot.png"
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1000,900", pages[1].as_uri()], capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 10_000  # an image with the chart in it, not a blank page
