"""evaluate.wire.heldout: the variants drawn from the secret seeds, and how a worker applies them."""

from __future__ import annotations

import random
import types
from pathlib import Path

import torch

from kforge_bot.evaluate.wire import heldout
from kforge_bot.evaluate.wire.plan import Fit, Plan
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import load_spec

PROBLEM = Path(__file__).parents[1] / "data" / "adversarial" / "problem.py"

KB_SOURCE = '''
import torch
batch_size = 16
dim = 16 * 1024
features = dim // 2
kernel_size = 3
height = width = 32
unused = 7
flag = True


def get_inputs():
    return [torch.randn(batch_size, dim, kernel_size, height, width)]


def get_init_inputs():
    return [features]
'''


def test_module_sizes_are_the_integers_the_input_functions_read() -> None:
    assert heldout.module_sizes(KB_SOURCE) == {"batch_size": 16, "dim": 16384, "features": 8192, "kernel_size": 3,
                                              "height": 32, "width": 32}


def test_nearby_sizes_are_odd_and_move_the_asked_way() -> None:
    rng = random.Random(0)
    for value in (16, 64, 128, 1024, 4096, 65536):
        smaller, larger = heldout.nearby(value, rng, False), heldout.nearby(value, rng, True)
        assert smaller % 2 == 1 and larger % 2 == 1
        assert smaller < value < larger
        assert abs(larger - value) <= value // 4 + 3 and abs(value - smaller) <= value // 4 + 3


def test_nearby_keeps_to_a_constraint() -> None:
    rng = random.Random(1)
    for _ in range(20):
        moved = heldout.nearby(1024, rng, rng.random() < 0.5, {"multiple_of": 256, "min": 256, "max": 2048})
        assert moved % 256 == 0 and moved % 512 and 256 <= moved <= 2048 and moved != 1024
    assert heldout.nearby(1024, rng, True, {"fixed": True}) == 1024
    assert heldout.nearby(1024, rng, True, {"max": 1024}) < 1024  # no room above: the other way


def test_draw_moves_every_size_once_smaller_and_once_larger_batch() -> None:
    shapes = ({"rows": 64, "cols": 1024, "axis": 1, "eps": 1e-5},)
    seeds = [123, 456, 789]
    variants = heldout.draw(shapes, seeds)
    assert len(variants) == heldout.VARIANTS
    first, second = variants[0][0], variants[1][0]
    assert first.sizes["rows"] < 64 < second.sizes["rows"]
    for v in (first, second):
        assert v.sizes["cols"] % 2 == 1 and v.sizes["axis"] == 1 and v.sizes["eps"] == 1e-5
        assert v.values is not None and v.where == "kwargs" and set(v.moved) == {"rows", "cols"}
    # The ladder: all sizes with values, all sizes, the batch alone with values, the batch alone.
    assert [(f.moved, f.values is not None) for f in variants[0]] == [
        (("rows", "cols"), True), (("rows", "cols"), False), (("rows",), True), (("rows",), False)]
    assert heldout.draw(shapes, seeds) == variants  # the same secret seeds, the same variants
    assert heldout.draw(shapes, [1, 2, 3]) != variants


def test_labels_name_the_sizes_and_the_seed() -> None:
    variant = heldout.draw(({"n": 1024},), [5])[0][0]
    assert variant.label.startswith(f"held-out variant 0 (n={variant.sizes['n']}; inputs x")
    assert variant.label.endswith(f" seed {variant.seed}")
    assert heldout.Variant.from_dict(variant.to_dict()) == variant


def test_module_globals_are_set_for_the_variant_and_put_back() -> None:
    module = types.ModuleType("m")
    module.batch_size, module.dim = 16, 1024
    variant = heldout.draw(({},), [9], globals_sizes={"batch_size": 16, "dim": 1024})[0][0]
    with heldout.module_globals([module], variant):
        assert (module.batch_size, module.dim) == (variant.sizes["batch_size"], variant.sizes["dim"])
    assert (module.batch_size, module.dim) == (16, 1024)


def test_changed_values_are_scaled_offset_and_heavy_tailed_alike_in_both_workers() -> None:
    values = heldout.Values(scale=3.0, offset=1.0, tail=0.01, tail_factor=8.0)
    torch.manual_seed(0)
    x = torch.randn(64, 1000)
    a, b, ints, out = x.clone(), x.clone(), torch.arange(10), torch.zeros(3)
    heldout.change_values([a, ints, out], values, 42, skip=frozenset({2}))
    heldout.change_values([b], values, 42)
    assert torch.equal(a, b)
    assert torch.equal(ints, torch.arange(10)) and torch.equal(out, torch.zeros(3))
    assert abs(float(a.mean()) - 1.0) < 0.2 and float(a.abs().max()) > 3.0 * float(x.abs().max())


def test_plan_cases_follow_the_reference_s_decision() -> None:
    spec = load_spec(PROBLEM)
    plan = Plan(role="candidate", target="cpu", spec=spec, baseline=spec.baseline, candidate=None,
                settings=EvalSettings(), seeds=[1, 2], out_dir=Path("/tmp"))
    forms = plan.heldout_forms()
    assert len(forms) == heldout.VARIANTS and plan.heldout_cases() == []  # undecided: nothing to check yet
    decided = (forms[0][0].to_dict(), heldout.skipped(forms[1], ["a reason"]).to_dict())
    fitted = plan.fitted(Fit(0, 0, heldout=decided))
    cases = fitted.heldout_cases()
    assert [c.label for c in cases] == [forms[0][0].label]  # the skipped variant is no case
    assert cases[0] in fitted.all_cases() and fitted.candidate_outputs() == plan.candidate_outputs() + 1
    assert Fit.from_dict(Fit(0, 0, heldout=decided).to_dict()).heldout == decided
    assert Plan.from_dict(fitted.to_dict()).heldout == decided
    off = Plan(role="candidate", target="cpu", spec=spec, baseline=spec.baseline, candidate=None,
               settings=EvalSettings(heldout=False), seeds=[1], out_dir=plan.out_dir)
    assert off.heldout_forms() == []


def test_no_sizes_means_values_only() -> None:
    forms = heldout.draw(({},), [3])[0]
    assert forms[0].moved == () and forms[0].values is not None
    assert forms[-1].values is None
