"""The README and the reference pages in docs/: MkDocs builds them strictly, and every link resolves.

MkDocs checks the links between pages (and their anchors); pages link the repository's other files as `repo:PATH`
(docs_hooks/repo_links.py makes them addresses under mkdocs.yml's repo_url, the one place that names the
repository), which MkDocs cannot check: they are checked here against the checkout, as are the README's links."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
REPO_URL = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["repo_url"]
# [text](target): the target up to the first space or closing parenthesis
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra: pip install -e '.[dev]'")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=project, capture_output=True, text=True, timeout=300)


def copy_of_the_docs(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copytree(ROOT / "docs_hooks", project / "docs_hooks")
    return project


def links(markdown: str) -> list[str]:
    return LINK.findall(FENCE.sub("", markdown))


def anchors(markdown: str) -> set[str]:
    """The ids GitHub and MkDocs both give a page's headings (lower case, punctuation dropped, spaces to '-')."""
    found = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        text = re.sub(r"[^\w\- ]", "", heading.replace("`", "")).strip().lower()
        found.add(re.sub(r"[\s]+", "-", text))
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The docs as they are, built once for the tests that read the site (a build is seconds)."""
    site = tmp_path_factory.mktemp("docs") / "site"
    return build(ROOT, site), site


def test_the_docs_build_strictly(built: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, site = built
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (site / "evaluation" / "index.html").is_file()


@pytest.mark.parametrize("broken", ["[a page](no-such-page.md)", "[a section](cli.md#no-such-section)"])
def test_a_broken_link_between_pages_fails_the_build(tmp_path: Path, broken: str) -> None:
    project = copy_of_the_docs(tmp_path)
    index = project / "docs" / "index.md"
    index.write_text(index.read_text() + f"\nSee {broken}.\n")
    proc = build(project, tmp_path / "site")
    # It fails, and on that link: the copy as it was builds (test_the_docs_build_strictly).
    assert proc.returncode != 0
    assert broken.split("(")[1].rstrip(")").split("#")[-1] in proc.stdout + proc.stderr


def test_links_to_repository_files_point_at_files_that_exist() -> None:
    """Absolute links into this repository (docs/ and the README) and the README's relative links resolve in the
    checkout, anchors into docs/ pages included."""
    broken = []
    sources = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    for source in sources:
        for target in links(source.read_text()):
            if target.startswith("repo:"):
                path = target.removeprefix("repo:") or "README.md"
            elif target.startswith(REPO_URL + "/blob/main/") or target.startswith(REPO_URL + "/tree/main/"):
                path = target.split("/main/", 1)[1]
            elif target.startswith(REPO_URL + "#"):  # the README, as GitHub shows it on the repository's page
                path = "README.md" + target.removeprefix(REPO_URL)
            elif target.startswith(("http://", "https://", "mailto:")):
                continue
            elif source.name == "README.md" and not target.startswith("#"):
                path = target
            else:
                continue  # between pages: MkDocs checks those
            path, _, anchor = path.partition("#")
            file = ROOT / path
            if not file.exists():
                broken.append(f"{source.relative_to(ROOT)}: {target}")
            elif anchor and anchor != "readme" and file.suffix == ".md" and anchor not in anchors(file.read_text()):
                broken.append(f"{source.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_repository_s_address_is_set_once_in_mkdocs_yml() -> None:
    """Pages name the repository's files as repo:PATH, never by an address; the package's URLs use the same one."""
    for page in sorted((ROOT / "docs").glob("*.md")):
        named = [target for target in links(page.read_text()) if "github.com/kforge-bot" in target]
        assert named == [], f"{page.name}: link the repository's files as repo:PATH"
    pyproject = (ROOT / "pyproject.toml").read_text().split("[project.urls]", 1)[1].split("\n[", 1)[0]
    addresses = re.findall(r'"(https://[^"]+)"', pyproject)
    assert addresses and all(a == REPO_URL or a.startswith(REPO_URL + "/") for a in addresses)


def test_a_repo_link_becomes_an_address_under_repo_url(built: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, site = built
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    html = (site / "security" / "index.html").read_text()
    assert f'href="{REPO_URL}/blob/main/SECURITY.md"' in html and "repo:" not in html


def test_the_readme_is_short_and_says_first_what_the_project_is() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 300
    first_paragraph = text.split("\n\n")[1]
    assert first_paragraph.startswith("kforge-bot ")
    # The two commands that work on a fresh machine come right after it, before any section.
    commands = text.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert commands[0].startswith("python3 -m venv .venv") and "kforge-bot optimize examples/kforge.yaml" in commands[0]
    assert commands[1].endswith("python -m pytest -q")
    assert "https://download.pytorch.org/whl/cpu" in text.split("## ", 1)[0]
    # A CPU torch wherever it runs (the CPU index in the command itself), and what draws the report's picture.
    assert "pip install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu" in commands[0]
    assert "pip install -e '.[plot]'" in commands[0]



def test_every_row_of_the_exit_code_table_names_a_test_that_exists() -> None:
    """docs/cli.md's exit-code table is the one statement of them; each row names the test that holds it."""
    table = (ROOT / "docs" / "cli.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) >= 10
    sources = {path: path.read_text() for path in (ROOT / "tests").rglob("test_*.py")}
    for row in rows:
        names = re.findall(r"`(test_\w+)`", row.rsplit("|", 2)[1])
        assert names, row
        for name in names:
            assert any(f"def {name}(" in text for text in sources.values()), f"{name} (docs/cli.md) is no test"
