"""Output checks: the parent's numeric comparison and the worker's structural checks, on real tensors."""

from __future__ import annotations

import pytest
import torch

from kforge_bot.evaluate.wire.checks import (
    DTYPE_TOLERANCES,
    PERTURBED_ELEMENTS,
    CheckFailure,
    check_inputs_unchanged,
    check_no_alias,
    check_plain_outputs,
    compare_outputs,
    compare_tensor,
    flatten_outputs,
    perturb_elements,
    snapshot_inputs,
    tolerance_for,
    undo_perturbation,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _ok(cand: torch.Tensor, ref: torch.Tensor, override: dict[str, float] | None = None) -> dict:
    return compare_tensor(0, cand, ref, override)


# ------------------------------------------------------------------------------------- tolerances


@pytest.mark.parametrize("dtype,good,bad", [
    (torch.float64, 1e-11, 1e-5),
    (torch.float32, 1e-6, 1e-3),
    (torch.float16, 2e-3, 5e-2),
    (torch.bfloat16, 4e-3, 1e-1),
])
def test_tolerance_follows_the_dtype(dtype: torch.dtype, good: float, bad: float) -> None:
    ref = torch.randn(64, 64, generator=_gen(1), dtype=torch.float64).to(dtype)
    close = (ref.double() * (1 + good)).to(dtype)
    far = (ref.double() * (1 + bad)).to(dtype)
    assert _ok(close, ref)["ok"], _ok(close, ref)
    record = _ok(far, ref)
    assert not record["ok"]
    assert "outside atol" in record["problem"] or "relative error" in record["problem"]
    assert record["dtype"] == str(dtype).replace("torch.", "")


def test_exact_match_reports_zero_error() -> None:
    ref = torch.randn(10, generator=_gen())
    record = _ok(ref.clone(), ref)
    assert record["ok"] and record["max_abs"] == 0.0 and record["rel_norm"] == 0.0
    assert (record["atol"], record["rtol"], record["norm_tol"]) == DTYPE_TOLERANCES[torch.float32]


def test_integer_and_bool_outputs_must_match_exactly() -> None:
    ref = torch.arange(20)
    assert _ok(ref.clone(), ref)["ok"]
    off = ref.clone()
    off[3] += 1
    record = _ok(off, ref)
    assert not record["ok"] and "1 of 20 integer elements differ" in record["problem"]
    flags = torch.tensor([True, False, True])
    assert not _ok(~flags, flags)["ok"]
    assert _ok(torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64))["ok"]


def test_manifest_override_loosens_elementwise_and_norm_bounds_together() -> None:
    assert tolerance_for(torch.float32, None) == DTYPE_TOLERANCES[torch.float32]
    assert tolerance_for(torch.float32, {"atol": 1e-2, "rtol": 1e-2}) == (1e-2, 1e-2, 1e-2)
    # only one side given: the norm bound keeps the dtype's
    assert tolerance_for(torch.float32, {"atol": 1e-2}) == (1e-2, 1e-4, 1e-4)
    # tighter than the dtype: the norm bound is never loosened by it
    assert tolerance_for(torch.float16, {"atol": 1e-5, "rtol": 1e-5})[2] == DTYPE_TOLERANCES[torch.float16][2]
    assert tolerance_for(torch.int32, None) == (0.0, 0.0, 0.0)
    ref = torch.randn(100, generator=_gen(2))
    assert not _ok(ref * 1.005, ref)["ok"]
    assert _ok(ref * 1.005, ref, {"atol": 1e-2, "rtol": 1e-2})["ok"]


# ---------------------------------------------------------------------------------------- NaN / Inf


def test_nan_or_inf_never_passes_where_the_reference_is_finite() -> None:
    ref = torch.randn(50, generator=_gen(3))
    for bad in (float("nan"), float("inf"), float("-inf")):
        cand = ref.clone()
        cand[7] = bad
        record = _ok(cand, ref)
        assert not record["ok"] and "1 NaN/Inf values where the reference is finite" in record["problem"]
    # a loose tolerance does not let NaN through either
    cand = ref.clone()
    cand[0] = float("nan")
    assert not _ok(cand, ref, {"atol": 1e9, "rtol": 1e9})["ok"]


def test_non_finite_reference_values_must_be_matched_exactly() -> None:
    ref = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    assert _ok(ref.clone(), ref)["ok"]
    wrong_sign = torch.tensor([1.0, float("nan"), float("-inf"), -2.0])
    assert "non-finite values differ" in _ok(wrong_sign, ref)["problem"]
    for finite_there in ([1.0, 0.0, float("inf"), -2.0], [1.0, float("nan"), 1.0, -2.0],
                         [1.0, float("inf"), float("inf"), -2.0]):
        record = _ok(torch.tensor(finite_there), ref)
        assert not record["ok"] and "non-finite values differ" in record["problem"], finite_there


# ------------------------------------------------------------------------------------ shape / dtype


def test_shape_dtype_and_count_mismatches() -> None:
    ref = torch.randn(4, 8, generator=_gen())
    assert "shape [8, 4] != expected [4, 8]" in _ok(ref.t().contiguous(), ref)["problem"]
    assert "shape [32] != expected [4, 8]" in _ok(ref.flatten(), ref)["problem"]
    assert "dtype torch.float64 != expected torch.float32" in _ok(ref.double(), ref)["problem"]
    assert "dtype torch.float16" in _ok(ref.half(), ref)["problem"]
    records = compare_outputs([ref], [ref, ref], None)
    assert not records[0]["ok"] and "1 outputs, expected 2" in records[0]["problem"]
    records = compare_outputs([ref, ref * 2], [ref, ref], None)
    assert [r["ok"] for r in records] == [True, False] and records[1]["index"] == 1


# ------------------------------------------------------------------ trivially small or constant output


def test_all_zeros_where_true_outputs_are_tiny_is_caught_by_the_norm_bound() -> None:
    # e.g. softmax over a huge row: every value far below fp32's atol of 1e-4
    ref = torch.softmax(0.1 * torch.randn(4, 200_000, generator=_gen(4)), dim=1)
    assert ref.abs().max() < 1e-4
    zeros = torch.zeros_like(ref)
    diff = (zeros - ref).abs()
    assert bool((diff <= 1e-4 + 1e-4 * ref.abs()).all())  # an atol/rtol check alone would pass it
    record = _ok(zeros, ref)
    assert not record["ok"]
    assert "relative error 1 over the bound" in record["problem"]


def test_zeros_against_an_all_zero_reference_pass_and_anything_else_does_not() -> None:
    ref = torch.zeros(16)
    assert _ok(torch.zeros(16), ref)["ok"]
    tiny = torch.full((16,), 1e-9)
    assert not _ok(tiny, ref)["ok"]  # no reference norm to be relative to: any error is infinite


def test_constant_output_where_the_reference_varies() -> None:
    ref = 1.0 + 1e-6 * torch.randn(1000, generator=_gen(5))
    cand = torch.full_like(ref, float(ref.mean()))
    record = _ok(cand, ref)
    assert record["max_abs"] < 1e-4 and record["rel_norm"] < 1e-4  # within every numeric bound...
    assert not record["ok"] and "constant where the reference varies" in record["problem"]
    assert _ok(torch.ones(5), torch.ones(5))["ok"]  # a constant reference may be matched by a constant


def test_bf16_computation_standing_in_for_fp32_is_caught() -> None:
    g = _gen(6)
    a = 0.01 * torch.randn(128, 256, generator=g)
    b = 0.01 * torch.randn(256, 128, generator=g)
    ref = a @ b  # values ~1e-3: below atol, so only the norm bound can see the lost precision
    downgraded = (a.bfloat16() @ b.bfloat16()).float()
    assert downgraded.dtype == torch.float32
    record = _ok(downgraded, ref)
    assert not record["ok"]
    assert "computed at lower precision" in record["problem"]
    assert 1e-3 < record["rel_norm"] < 1e-2
    # tf32-like (1e-3 relative) and even ~3e-4 relative noise are rejected at fp32; fp32 rounding is not
    assert not _ok(ref * (1 + 3e-4 * torch.randn(ref.shape, generator=g)), ref)["ok"]
    assert _ok(ref * (1 + 1e-6 * torch.randn(ref.shape, generator=g)), ref)["ok"]


# ------------------------------------------------------------------------------- structural checks


def test_plain_outputs_only() -> None:
    check_plain_outputs([torch.ones(2), torch.zeros(3, dtype=torch.int64)], "cpu")

    class Lazy(torch.Tensor):
        pass

    with pytest.raises(CheckFailure) as info:
        check_plain_outputs([torch.ones(2), torch.ones(2).as_subclass(Lazy)], "cpu")
    assert info.value.kind == "rejected" and "output 1 is a" in str(info.value) and "Lazy" in str(info.value)
    with pytest.raises(CheckFailure) as info:
        check_plain_outputs([torch.nn.Parameter(torch.ones(2))], "cpu")
    assert info.value.kind == "rejected"
    with pytest.raises(CheckFailure) as info:
        check_plain_outputs([3.0], "cpu")
    assert info.value.kind == "incorrect" and "float" in str(info.value)
    with pytest.raises(CheckFailure) as info:
        check_plain_outputs([torch.eye(3).to_sparse()], "cpu")
    assert "layout" in str(info.value)
    with pytest.raises(CheckFailure) as info:
        check_plain_outputs([torch.empty(3, device="meta")], "cpu")
    assert "meta" in str(info.value)
    with pytest.raises(CheckFailure) as info:
        check_plain_outputs([torch.ones(2)], "cuda")
    assert "expected the cuda device" in str(info.value)
    with pytest.raises(CheckFailure) as info:
        check_plain_outputs([], "cpu")
    assert "no outputs" in str(info.value)


def test_flatten_outputs_walks_nested_tuples_and_lists() -> None:
    a, b, c = torch.ones(1), torch.ones(2), torch.ones(3)
    assert [t.numel() for t in flatten_outputs((a, [b, (c,)]))] == [1, 2, 3]
    assert flatten_outputs(a)[0] is a


def test_outputs_must_not_alias_inputs_or_each_other() -> None:
    x = torch.randn(8, 8)
    check_no_alias([x.clone(), torch.empty(0)], [x, 3, torch.empty(0)])
    for aliased in (x, x.view(64), x[2:4], x.t(), x.as_strided((2,), (1,), 62)):
        with pytest.raises(CheckFailure) as info:
            check_no_alias([aliased], [x])
        assert info.value.kind == "rejected" and "output 0 shares memory with input 0" in str(info.value)
    out = torch.empty(10)
    with pytest.raises(CheckFailure) as info:
        check_no_alias([out[:5], out[5:]], [x])  # two outputs carved from one buffer
    assert "outputs 0 and 1 share memory" in str(info.value)


def test_inputs_must_stay_unchanged() -> None:
    x, y = torch.randn(5), torch.arange(4)
    before = snapshot_inputs([x, y, "not a tensor"])
    check_inputs_unchanged([x, y, "not a tensor"], before)
    y[0] = 99
    with pytest.raises(CheckFailure) as info:
        check_inputs_unchanged([x, y, "not a tensor"], before)
    assert info.value.kind == "rejected" and "input 1 was modified in place" in str(info.value)
    # NaN written into an input counts as a change as well
    x2 = torch.randn(3)
    before = snapshot_inputs([x2])
    x2[1] = float("nan")
    with pytest.raises(CheckFailure):
        check_inputs_unchanged([x2], before)


# ------------------------------------------------------------------------------ the changed-element case


def test_perturb_elements_overwrites_elements_with_other_values_of_the_input_the_same_way_each_time() -> None:
    index = torch.arange(6)  # integer inputs are left alone: the first floating-point tensor is changed
    x = torch.randn(7, 9, generator=_gen(1)).t()  # not contiguous: the elements are written in place all the same
    before = x.clone()
    assert perturb_elements([index, x], seed=123_457)
    changed = (x != before).nonzero()
    assert 8 <= changed.shape[0] <= PERTURBED_ELEMENTS and torch.equal(index, torch.arange(6))
    for position in changed:
        value = x[tuple(position)]
        assert (before == value).sum() >= 1 and before[tuple(position)] != value  # copied from another position
    again = before.clone()
    perturb_elements([torch.arange(6), again], seed=123_457)
    assert torch.equal(again, x)  # the reference's worker and the candidate's make the same change
    undo: list = []
    perturb_elements([again], seed=99, undo=undo)
    undo_perturbation(undo)
    assert torch.equal(again, x)  # put back exactly
    assert not perturb_elements([torch.arange(6), torch.ones(1)], seed=5)  # nothing to change
    two = torch.tensor([1.0, 2.0])
    assert perturb_elements([two], seed=3) and sorted(two.tolist()) in ([1.0, 1.0], [2.0, 2.0])  # at most numel - 1


def test_a_relu_answer_moves_when_the_elements_change() -> None:
    """One changed element left a ReLU's output as it was whenever it fell in the zero region (batch-and-skip got
    through that way); the elements changed now move the answer."""
    for seed in range(200):
        a, b = torch.randn(33, 33, generator=_gen(seed)), torch.randn(33, 33, generator=_gen(seed + 1000))
        before = torch.relu(a + 2 * b)
        perturb_elements([a, b], seed=seed * 7919 + 1)
        assert not torch.equal(torch.relu(a + 2 * b), before), seed


def test_comparing_in_chunks_decides_exactly_as_comparing_whole(monkeypatch) -> None:
    """A multi-gigabyte output is compared a chunk at a time; every verdict and figure is the same as whole."""
    from kforge_bot.evaluate.wire import checks

    torch.manual_seed(3)
    ref = torch.randn(1000)
    cases = {"equal": ref.clone(), "one bad": ref.clone().index_fill_(0, torch.tensor([777]), 5.0),
             "nan": ref.clone().index_fill_(0, torch.tensor([10]), float("nan")),
             "constant": torch.full_like(ref, 0.1), "scaled": ref * 1.001}
    whole = {name: checks.compare_tensor(0, cand, ref, None) for name, cand in cases.items()}
    monkeypatch.setattr(checks, "COMPARE_CHUNK", 7)
    for name, cand in cases.items():
        chunked = checks.compare_tensor(0, cand, ref, None)
        assert chunked.keys() == whole[name].keys(), name
        for key, value in whole[name].items():
            assert chunked[key] == pytest.approx(value, rel=1e-9) if isinstance(value, float) else chunked[key] == value, name
    assert [whole[n]["ok"] for n in cases] == [True, False, False, False, False]


def test_containers_are_read_as_their_base_class_holds_them_and_tensors_may_not_carry_methods() -> None:
    # Both would run the candidate's code when the harness looks at an output, after the timed region.
    from kforge_bot.evaluate.wire import checks

    ran = []

    class Lazy(list):
        def __iter__(self):
            ran.append(True)
            return iter([torch.ones(2)])

    assert checks.flatten_outputs(Lazy()) == [] and not ran
    assert len(checks.flatten_outputs((torch.ones(1), [torch.ones(2)]))) == 2
    assert len(checks.flatten_outputs(torch.max(torch.randn(3, 4), dim=1))) == 2  # a structseq is a tuple

    out = torch.ones(3)
    checks.check_plain_outputs([out], "cpu")
    out.clone = lambda: ran.append(True)
    with pytest.raises(checks.CheckFailure, match=r"output 0 has attributes of its own \(clone\)"):
        checks.check_plain_outputs([out], "cpu")
    x = torch.ones(3)
    checks.check_inputs_plain([x, 3])
    x.copy_ = lambda other: None
    with pytest.raises(checks.CheckFailure, match=r"input 0 was given attributes of its own \(copy_\)"):
        checks.check_inputs_plain([x])
    assert not ran


def _weight_gradient(rows: int = 8192, cols: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """A bf16 weight's gradient as a training kernel computes it (each product rounded to bf16, summed in fp32)
    and as an fp32 reference does: the sums cancel to near zero here and there, each with the same rounding error."""
    gen = torch.Generator().manual_seed(0)
    upstream = torch.randn(rows, cols, generator=gen).bfloat16()
    normed = torch.randn(rows, cols, generator=gen).bfloat16()
    kernel = (upstream * normed).float().sum(0).bfloat16()  # bf16 products, as Liger's RMSNorm backward
    exact = (upstream.float() * normed.float()).sum(0).bfloat16()
    return kernel, exact


def test_a_bf16_weight_gradient_is_judged_against_the_size_of_its_terms() -> None:
    kernel, exact = _weight_gradient()
    assert not compare_tensor(0, kernel, exact, None)["ok"]  # as an output: near-zero sums miss atol
    record = compare_tensor(0, kernel, exact, None, gradient=True)
    assert record["ok"], record
    assert record["atol_scaled_by"] > 50  # rms of a sum of 8192 unit terms


def test_a_wrong_gradient_still_fails_with_the_scaled_atol() -> None:
    kernel, exact = _weight_gradient()
    off_by_a_few_percent = (exact.float() * 1.05).bfloat16()
    assert not compare_tensor(0, off_by_a_few_percent, exact, None, gradient=True)["ok"]
    one_wrong = exact.clone()
    one_wrong[7] += 5 * float(exact.float().pow(2).mean().sqrt())
    assert "outside atol" in compare_tensor(0, one_wrong, exact, None, gradient=True)["problem"]


def test_only_the_trailing_gradients_get_the_scaled_atol() -> None:
    kernel, exact = _weight_gradient()
    records = compare_outputs([kernel, kernel], [exact, exact], None, gradients=1)
    assert [r["ok"] for r in records] == [False, True]
