"""The run's starting point, measured once and recorded before the first round: the kernel as written (against
itself), its hardware counters, the compiled baselines the policy asks for, the workload and the device's
ceilings (the roofline). A resumed run measures only what its trajectory lacks."""

from __future__ import annotations

from kforge_bot.errors import KforgeError
from kforge_bot.optimize.counters import Counters
from kforge_bot.optimize.profiling import profile
from kforge_bot.optimize.hardware_context import hardware_context, hardware_text
from kforge_bot.optimize.protocols import Evaluator
from kforge_bot.optimize.roofline import WorkloadModel, workload
from kforge_bot.optimize.trajectory import Trajectory
from kforge_bot.kernelspec import KernelSpec
from kforge_bot.text import one_line

# inconclusive: correct, its timing (against itself) disturbed: a correct starting point all the same.
CORRECT = ("pass", "inconclusive")


def measure_starting_point(spec: KernelSpec, target: str, trajectory: Trajectory, evaluator: Evaluator, *,
                           compiled: tuple[str, ...], counters: Counters | None,
                           workload_model: WorkloadModel | None) -> str:
    """Measure and record what the trajectory lacks of the starting point; returns what the agents are told of
    the device. KforgeError: the kernel as written fails its own check."""
    record = trajectory.record
    if record.baseline is None:
        result, eval_s = evaluator.submit(spec.baseline).result()
        trajectory.append("baseline", result=result.to_dict(), eval_s=round(eval_s, 3))
    baseline = record.baseline or {}
    if baseline.get("verdict") not in CORRECT:
        raise KforgeError(
            f"the kernel as written fails its own check ({baseline.get('verdict')}: "
            f"{one_line(str(baseline.get('reason', '')), 300)})", path=spec.kernel_path,
            hint="run `kforge-bot check` on it to see why; optimizing needs a correct starting point")
    profile(counters, trajectory, 0, spec.baseline)
    if compiled and record.compiled_baselines is None:
        measured = evaluator.compiled_baselines(compiled)
        trajectory.append("compiled_baselines", baselines={k: c.to_dict() for k, c in measured.items()})
    if record.workload is None:
        trajectory.append("workload", **workload(spec.shape_sets, record.baseline, workload_model))
    device = str(baseline.get("device_name") or "")
    facts, ceilings, origin_note = hardware_context(target, device)
    if record.ceilings is None and not any(e.get("event") == "ceilings" for e in trajectory.events):
        trajectory.append("ceilings", ceilings=ceilings, device_name=device, note=origin_note,
                          runner=facts.name if facts else None)
    return hardware_text(target, device, facts, record.ceilings)
