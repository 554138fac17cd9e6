"""Worker-side loading: each implementation sees its own repository's local modules."""

from __future__ import annotations

import py_compile
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from kforge_bot.evaluate.worker import loading
from kforge_bot.evaluate.worker.importing import import_implementation
from kforge_bot.kernelspec import Implementation


def _repo(root: Path, value: int) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "helper.py").write_text(f"VALUE = {value}\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "deep.py").write_text(f"DEEP = {value * 10}\n")
    return root


KERNEL = "from helper import VALUE\nfrom pkg.deep import DEEP\n\ndef entry():\n    return VALUE, DEEP\n"


def test_base_and_head_checkouts_keep_their_own_helpers(tmp_path: Path) -> None:
    base = _repo(tmp_path / "base", 1)
    head = _repo(tmp_path / "head", 2)
    work = tmp_path / "work"
    first = import_implementation(Implementation(KERNEL, "entry", "k.py", str(base)), work, "baseline")
    second = import_implementation(Implementation(KERNEL + "# head\n", "entry", "k.py", str(head)), work, "candidate")
    again = import_implementation(Implementation(KERNEL + "# again\n", "entry", "k.py", str(base)), work, "reference")
    assert first.entry() == (1, 10)
    assert second.entry() == (2, 20)
    assert again.entry() == (1, 10)
    # Nothing local stays registered to shadow the next import.
    assert "helper" not in sys.modules and "pkg.deep" not in sys.modules


def test_a_modules_name_and_path_say_its_role_never_which_source(tmp_path: Path) -> None:
    """Issue 28, class 4: a digest in a module's name let a head tell the base's source from its own beside it,
    and so a comparison from a run alone."""
    seen = []
    for n, source in enumerate((KERNEL, KERNEL + "# another source\n")):
        module = import_implementation(Implementation(source, "entry", "k.py", str(_repo(tmp_path / f"r{n}", n))),
                                       tmp_path / f"work{n}", "candidate")
        seen.append((module.__name__, Path(module.__file__).relative_to(tmp_path / f"work{n}").as_posix()))
        del sys.modules[module.__name__]
    assert seen[0] == seen[1] == ("_kforge_candidate", "candidate_code/k.py")


def test_a_repositorys_own_bytecode_is_never_what_runs(tmp_path: Path) -> None:
    # A pull request can commit bytecode a reviewer never reads: an unchecked .pyc of `VALUE = 2` beside a
    # helper.py that says 1 (and one for pkg/deep.py), and a ghost.pyc with no source at all.
    repo = _repo(tmp_path / "repo", 2)
    for source in (repo / "helper.py", repo / "pkg" / "deep.py"):
        py_compile.compile(str(source), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    py_compile.compile(str(repo / "helper.py"), cfile=str(repo / "ghost.pyc"), doraise=True)
    _repo(tmp_path / "reviewed", 1)
    for name in ("helper.py", "pkg/deep.py"):
        (repo / name).write_text((tmp_path / "reviewed" / name).read_text())
    module = import_implementation(Implementation(KERNEL, "entry", "k.py", str(repo)), tmp_path / "work", "candidate")
    assert module.entry() == (1, 10)
    ghost = Implementation("import ghost\n", "x", "g.py", str(repo))
    with pytest.raises(ModuleNotFoundError):
        import_implementation(ghost, tmp_path / "work", "candidate")
    assert sorted(p.name for p in (repo / "__pycache__").iterdir()) == [f"helper.{sys.implementation.cache_tag}.pyc"]


def test_equal_weights_are_shared_with_the_baseline_and_different_ones_are_not() -> None:
    import torch

    from kforge_bot.evaluate.worker.loading import share_matching_state

    torch.manual_seed(0)
    baseline = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    candidate = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    candidate.load_state_dict(baseline.state_dict())
    with torch.no_grad():
        candidate[1].bias.add_(1.0)  # differs: stays the candidate's own
    own_weight = candidate[0].weight.data_ptr()
    shared = share_matching_state(candidate, baseline)
    assert [name for name, _ in shared] == ["0.weight", "0.bias", "1.weight"]
    assert candidate[0].weight.data_ptr() == baseline[0].weight.data_ptr()
    assert candidate[1].bias.data_ptr() != baseline[1].bias.data_ptr()
    # The candidate's own copies stay alive: a pointer kept from before the sharing still reads valid memory.
    assert own_weight in {t.data_ptr() for t in candidate._kforge_unshared}
    assert share_matching_state(baseline, baseline) == []
    assert share_matching_state(lambda x: x, baseline) == []


class _Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)


class _HostOnly(nn.Module):
    """An __init__ that only works on the host (a tensor read back through numpy)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.total = float(self.fc.weight.detach().numpy().sum())


def test_modules_are_built_on_the_device_and_host_only_ones_on_the_host() -> None:
    """Parameters are created where the inputs are (KernelBench L2 55's 4.3 GB Linear took 9-13 s a worker to
    initialise on the H200 host); the meta device stands in for a GPU: nothing there can be read back."""
    meta = torch.device("meta")
    assert loading._construct(_Linear, [], {}, 7, meta).fc.weight.device.type == "meta"
    host = loading._construct(_HostOnly, [], {}, 7, meta)
    assert host.fc.weight.device.type == "cpu"
    again = loading._construct(_HostOnly, [], {}, 7, torch.device("cpu"))
    assert torch.equal(host.fc.weight, again.fc.weight)  # seeded alike: the fallback builds what the host would


class _OutOfMemory(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        raise torch.OutOfMemoryError("CUDA out of memory (stand-in)")


def test_a_device_out_of_memory_is_not_retried_on_the_host() -> None:
    """Built on the host, the weights come from another generator than the other side's built on the device: an
    honest candidate would be judged incorrect (a red-team pass). The device's own failure is reported instead."""
    with pytest.raises(torch.OutOfMemoryError):
        loading._construct(_OutOfMemory, [], {}, 7, torch.device("meta"))
