"""Workloads: what a kernel change does to the programs that use the kernels (a model's forward, a decode loop, a
training step), timed end to end.

- `spec.py`: a manifest's `workloads:` entries (program, inputs and seed, unit, how outputs are compared);
- `worker.py`: the child process that runs one workload once (sandboxed, as every worker);
- `compare.py`: whether the head's output matches the base's (greedy tokens exactly, logits within a tolerance);
- `measure.py`: base and head in fresh processes, alternating in pairs, until the paired ratio's interval is
  narrow enough or the budget ends;
- `gate.py`: the gate's rows: which workloads a change touches, their verdicts against `gate.workloads`.

In a pull request the workload's entry, inputs, seed and comparison come from the base branch; only the kernel
code (the manifest's kernel files and what they import) comes from the head.
"""
