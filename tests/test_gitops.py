"""gitops against real repositories: a bare origin and a clone, as actions/checkout leaves them."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from kforge_bot import gitops
from kforge_bot.errors import KforgeError
from fakes.gitrepos import commit_all, git, make_repos, write


@pytest.fixture()
def repos(tmp_path: Path):
    return make_repos(tmp_path)


def test_changed_files_uses_merge_base(repos):
    changed = gitops.changed_files(repos.clone, repos.base_sha, repos.head_sha)
    assert sorted((c.status, c.path) for c in changed) == [("A", "kernels/gelu.py"), ("M", "kernels/rmsnorm.py")]
    # README changed on main after the fork: base..head would list it, base...head must not.
    assert "README.md" not in {c.path for c in changed}


def test_changed_files_reports_renames_and_deletes(repos):
    git(repos.clone, "checkout", "-q", "-b", "moves", repos.head_sha)
    git(repos.clone, "mv", "kernels/softmax.py", "kernels/softmax_v2.py")
    git(repos.clone, "rm", "-q", "kernels/gelu.py")
    head = commit_all(repos.clone, "move and delete")
    changed = {c.path: c for c in gitops.changed_files(repos.clone, repos.head_sha, head)}
    assert changed["kernels/softmax_v2.py"].status == "R"
    assert changed["kernels/softmax_v2.py"].old_path == "kernels/softmax.py"
    assert changed["kernels/gelu.py"].status == "D"


def test_unknown_revision_is_a_clear_error(repos):
    with pytest.raises(KforgeError, match="unknown revision 'nope'.*fetch-depth"):
        gitops.changed_files(repos.clone, "nope", repos.head_sha)


def test_not_a_repository(tmp_path):
    with pytest.raises(KforgeError, match="not a git repository"):
        gitops.changed_files(tmp_path, "a", "b")


def test_read_file_at(repos):
    assert gitops.read_file_at(repos.clone, repos.head_sha, "kernels/rmsnorm.py") == "BLOCK = 256\n"
    assert gitops.read_file_at(repos.clone, repos.base_sha, "kernels/rmsnorm.py") == "BLOCK = 128\n"
    assert gitops.read_file_at(repos.clone, repos.base_sha, "kernels/gelu.py") is None
    assert gitops.read_file_at(repos.clone, repos.base_sha, "kernels") is None  # a tree, not a file


def test_branch_names_round_trip():
    assert gitops.bot_branch(12, "rmsnorm") == "kforge/pr-12/rmsnorm"
    assert gitops.parse_bot_branch("kforge/pr-12/rmsnorm") == (12, "rmsnorm")
    weird = gitops.bot_branch(3, "ops/fused attention..v2.lock")
    assert weird == "kforge/pr-3/ops-fused-attention.v2-lock"
    assert git(Path("."), "check-ref-format", f"refs/heads/{weird}") == ""
    assert gitops.parse_bot_branch(weird) == (3, "ops-fused-attention.v2-lock")
    assert gitops.parse_bot_branch("feature/x") is None


def _status(repos) -> str:
    return git(repos.clone, "status", "--porcelain")


def test_push_creates_then_updates_then_is_unchanged(repos):
    before_status = _status(repos)
    branch = gitops.bot_branch(7, "rmsnorm")
    r1 = gitops.push_bot_branch(repos.clone, branch=branch, parent=repos.head_sha,
                                files={"kernels/rmsnorm.py": "BLOCK = 512\n"}, message="kforge: rmsnorm")
    assert r1.status == "created" and r1.pushed
    assert git(repos.origin, "rev-parse", f"refs/heads/{branch}") == r1.sha
    assert git(repos.origin, "show", f"{branch}:kernels/rmsnorm.py") == "BLOCK = 512"
    assert git(repos.origin, "rev-parse", f"{branch}^") == repos.head_sha
    author = git(repos.origin, "log", "-1", "--format=%an <%ae>|%cn <%ce>", branch)
    assert author == "kforge-bot <kforge-bot@users.noreply.github.com>|kforge-bot <kforge-bot@users.noreply.github.com>"
    assert "Kforge-Bot: pr=7 kernel=rmsnorm" in git(repos.origin, "log", "-1", "--format=%B", branch)
    # The Action's working tree and index are untouched.
    assert _status(repos) == before_status
    assert git(repos.clone, "rev-parse", "HEAD") == repos.base_sha

    r2 = gitops.push_bot_branch(repos.clone, branch=branch, parent=repos.head_sha,
                                files={"kernels/rmsnorm.py": "BLOCK = 1024\n"}, message="kforge: rmsnorm")
    assert r2.status == "updated" and r2.sha != r1.sha
    assert git(repos.origin, "show", f"{branch}:kernels/rmsnorm.py") == "BLOCK = 1024"
    # Still exactly one bot commit on top of the PR head: replaced, not stacked.
    assert git(repos.origin, "rev-list", "--count", f"{repos.head_sha}..{branch}") == "1"

    r3 = gitops.push_bot_branch(repos.clone, branch=branch, parent=repos.head_sha,
                                files={"kernels/rmsnorm.py": "BLOCK = 1024\n"}, message="kforge: rmsnorm")
    assert r3.status == "unchanged" and not r3.pushed and r3.sha == r2.sha


def test_human_push_stops_updates(repos, tmp_path):
    branch = gitops.bot_branch(7, "rmsnorm")
    r1 = gitops.push_bot_branch(repos.clone, branch=branch, parent=repos.head_sha,
                                files={"kernels/rmsnorm.py": "BLOCK = 512\n"}, message="kforge: rmsnorm")
    human = tmp_path / "human"
    git(tmp_path, "clone", "-q", "-b", branch, str(repos.origin), str(human))
    write(human, "kernels/rmsnorm.py", "BLOCK = 384  # tweaked by hand\n")
    human_sha = commit_all(human, "hand tuning")
    git(human, "push", "-q", "origin", branch)

    r2 = gitops.push_bot_branch(repos.clone, branch=branch, parent=repos.head_sha,
                                files={"kernels/rmsnorm.py": "BLOCK = 2048\n"}, message="kforge: rmsnorm")
    assert r2.status == "human-pushed" and not r2.pushed
    assert [c.sha for c in r2.foreign_commits] == [human_sha]
    assert r2.foreign_commits[0].author_email == "ada@example.com"
    # The human's work is still there.
    assert git(repos.origin, "rev-parse", f"refs/heads/{branch}") == human_sha
    assert r1.sha == git(repos.origin, "rev-parse", f"{branch}^")


def test_amended_bot_commit_counts_as_human(repos, tmp_path):
    branch = gitops.bot_branch(7, "rmsnorm")
    gitops.push_bot_branch(repos.clone, branch=branch, parent=repos.head_sha,
                           files={"kernels/rmsnorm.py": "BLOCK = 512\n"}, message="kforge: rmsnorm")
    human = tmp_path / "human"
    git(tmp_path, "clone", "-q", "-b", branch, str(repos.origin), str(human))
    write(human, "kernels/rmsnorm.py", "BLOCK = 500\n")
    git(human, "commit", "-q", "-a", "--amend", "--no-edit")  # keeps the bot as author, a human commits
    git(human, "push", "-q", "-f", "origin", branch)
    r = gitops.push_bot_branch(repos.clone, branch=branch, parent=repos.head_sha,
                               files={"kernels/rmsnorm.py": "BLOCK = 2048\n"}, message="kforge: rmsnorm")
    assert r.status == "human-pushed"
    assert r.foreign_commits[0].author_email == gitops.BOT_IDENTITY.email
    assert r.foreign_commits[0].committer_email == "ada@example.com"


def test_branch_not_created_by_bot_is_never_pushed(repos, tmp_path):
    branch = gitops.bot_branch(9, "softmax")
    git(repos.clone, "push", "-q", "origin", f"{repos.head_sha}:refs/heads/{branch}")
    r = gitops.push_bot_branch(repos.clone, branch=branch, parent=repos.head_sha,
                               files={"kernels/softmax.py": "x = 1\n"}, message="kforge: softmax")
    assert r.status == "human-pushed"
    assert git(repos.origin, "rev-parse", f"refs/heads/{branch}") == repos.head_sha


def test_refuses_branches_outside_the_bot_namespace(repos):
    with pytest.raises(KforgeError, match="refusing to push to 'feature'"):
        gitops.push_bot_branch(repos.clone, branch="feature", parent=repos.head_sha,
                               files={"a.py": "x\n"}, message="m")


def test_rejected_push_raises(repos):
    # A pre-receive hook on origin rejects every push: the flags must be checked, not ignored.
    hook = repos.origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'protected branch' >&2\nexit 1\n")
    hook.chmod(0o755)
    with pytest.raises(KforgeError, match="push of kforge/pr-7/rmsnorm to origin was rejected|failed"):
        gitops.push_bot_branch(repos.clone, branch=gitops.bot_branch(7, "rmsnorm"), parent=repos.head_sha,
                               files={"kernels/rmsnorm.py": "BLOCK = 1\n"}, message="kforge: rmsnorm")


def test_lease_protects_against_a_race(repos, tmp_path, monkeypatch):
    branch = gitops.bot_branch(7, "rmsnorm")
    gitops.push_bot_branch(repos.clone, branch=branch, parent=repos.head_sha,
                           files={"kernels/rmsnorm.py": "BLOCK = 512\n"}, message="kforge: rmsnorm")
    # A human pushes between the bot's inspection (foreign_commits) and its push.
    real = gitops.foreign_commits

    def inspect_then_race(*args, **kwargs):
        result = real(*args, **kwargs)
        human = tmp_path / "racer"
        git(tmp_path, "clone", "-q", "-b", branch, str(repos.origin), str(human))
        write(human, "kernels/rmsnorm.py", "BLOCK = 3\n")
        commit_all(human, "racing")
        git(human, "push", "-q", "origin", branch)
        return result

    monkeypatch.setattr(gitops, "foreign_commits", inspect_then_race)
    with pytest.raises(KforgeError, match="push of kforge/pr-7/rmsnorm"):
        gitops.push_bot_branch(repos.clone, branch=branch, parent=repos.head_sha,
                               files={"kernels/rmsnorm.py": "BLOCK = 2048\n"}, message="kforge: rmsnorm")
    assert git(repos.origin, "log", "-1", "--format=%s", branch) == "racing"


def test_parent_missing_locally_is_fetched(repos, tmp_path):
    # A depth-1 clone of main does not have the PR head; the bot fetches it from origin.
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repos.origin}", str(shallow))
    r = gitops.push_bot_branch(shallow, branch=gitops.bot_branch(1, "gelu"), parent=repos.head_sha,
                               files={"kernels/gelu.py": "def gelu(x):\n    return x * 1\n"}, message="kforge: gelu")
    assert r.status == "created"
    assert git(repos.origin, "rev-parse", f"{r.branch}^") == repos.head_sha


def test_commit_files_keeps_modes_and_deletes(repos):
    git(repos.clone, "checkout", "-q", "-b", "exec", repos.head_sha)
    write(repos.clone, "run.sh", "#!/bin/sh\n")
    (repos.clone / "run.sh").chmod(0o755)
    parent = commit_all(repos.clone, "script")
    sha = gitops.commit_files(repos.clone, parent, {"run.sh": "#!/bin/sh\necho hi\n", "kernels/gelu.py": None},
                              "kforge: test\n\nKforge-Bot: pr=1 kernel=x")
    tree = git(repos.clone, "ls-tree", "-r", sha)
    assert "100755 blob" in next(line for line in tree.splitlines() if line.endswith("run.sh"))
    assert "kernels/gelu.py" not in tree
    with pytest.raises(KforgeError, match="outside the repository"):
        gitops.commit_files(repos.clone, parent, {"../evil": "x"}, "m")


def test_worktree_checks_out_a_revision_and_cleans_up(repos):
    with gitops.worktree(repos.clone, repos.head_sha) as path:
        assert (path / "kernels" / "rmsnorm.py").read_text() == "BLOCK = 256\n"
        assert (path / "kernels" / "gelu.py").exists()
        kept = path
    assert not kept.exists()
    assert str(kept) not in git(repos.clone, "worktree", "list")


def _plant_hook(repo: Path, name: str, log: Path) -> None:
    hook = repo / ".git" / "hooks" / name
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(f"#!/bin/sh\necho \"$0 ran with GITHUB_TOKEN=$GITHUB_TOKEN\" >> {log}\n")
    hook.chmod(0o755)


def test_planted_hooks_filters_and_fsmonitor_never_run_in_the_bot(repos, tmp_path, monkeypatch):
    """What code under test could have written into the checkout's .git: a post-checkout hook (ran at each
    `git worktree add`), a pre-push hook (ran at the bot's push, token in its environment), a smudge filter
    and an fsmonitor command. None may run inside the bot."""
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_hook_test_token")
    log = tmp_path / "ran.log"
    for name in ("post-checkout", "pre-push", "reference-transaction", "pre-auto-gc"):
        _plant_hook(repos.clone, name, log)
    marker = tmp_path / "filter-ran"
    write(repos.clone, ".gitattributes", "*.py filter=evil\n")
    sha = commit_all(repos.clone, "attributes", env={"GIT_CONFIG_PARAMETERS": "'core.hooksPath=/dev/null'"})
    git(repos.clone, "config", "filter.evil.smudge", f"sh -c 'touch {marker}; cat'")
    git(repos.clone, "config", "filter.evil.clean", "cat")
    git(repos.clone, "config", "filter.evil.required", "true")
    git(repos.clone, "config", "core.fsmonitor", f"sh -c 'touch {marker}-fsmonitor'")
    with gitops.worktree(repos.clone, sha) as path:
        assert (path / "kernels" / "rmsnorm.py").read_text() == (repos.clone / "kernels" / "rmsnorm.py").read_text()
    gitops.changed_files(repos.clone, repos.base_sha, sha)
    result = gitops.push_bot_branch(repos.clone, branch=gitops.bot_branch(9, "rmsnorm"), parent=sha,
                                    files={"kernels/rmsnorm.py": "BLOCK = 512\n"}, message="kforge: rmsnorm")
    assert result.status == "created"
    assert not log.exists(), log.read_text()
    assert not marker.exists() and not Path(f"{marker}-fsmonitor").exists()
    # The same hooks do run for a plain git command: the test plants real ones.
    git(repos.clone, "checkout", "-q", "-b", "scratch")
    assert "post-checkout ran with GITHUB_TOKEN=ghp_hook_test_token" in log.read_text()


def test_the_gates_operations_work_without_gitpython(repos):
    """GPU runners may lack GitPython: what the gate uses (resolve, diff, read, worktree) needs only git."""
    import subprocess
    import sys

    script = f"""
import sys
sys.modules["git"] = None  # importing GitPython now fails
from kforge_bot import gitops
changed = gitops.changed_files({str(repos.clone)!r}, {repos.base_sha!r}, {repos.head_sha!r})
assert sorted(c.path for c in changed) == ["kernels/gelu.py", "kernels/rmsnorm.py"], changed
assert gitops.read_file_at({str(repos.clone)!r}, {repos.head_sha!r}, "kernels/rmsnorm.py")
assert gitops.read_file_at({str(repos.clone)!r}, {repos.head_sha!r}, "kernels") is None
with gitops.worktree({str(repos.clone)!r}, {repos.base_sha!r}) as tree:
    assert (tree / "kernels" / "rmsnorm.py").is_file()
try:
    gitops.open_repo({str(repos.clone)!r})
except Exception as exc:
    print("open_repo:", exc)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=str(Path(__file__).parents[1]))
    assert proc.returncode == 0, proc.stderr
    assert "GitPython is not installed" in proc.stdout  # the bot's own writes still say what is missing


def test_a_worktree_git_refuses_leaves_no_temporary_folder(repos, tmp_path, monkeypatch):
    """A checkout where git cannot add a worktree (read-only, or as here its worktrees folder a file, which fails
    for root too) gets a one-line error, and the temporary folder made for the worktree is gone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    worktrees = Path(repos.clone) / ".git" / "worktrees"
    shutil.rmtree(worktrees, ignore_errors=True)
    worktrees.write_text("not a folder")
    with pytest.raises(KforgeError, match="cannot check out"):
        with gitops.worktree(repos.clone, repos.head_sha):
            pass
    assert list((tmp_path / "tmp").iterdir()) == []
