"""The regression gate: base against head for every managed kernel a change touches.

For each kernel the change touches (its file, its reference or inputs, a local file any of them
imports, or its manifest entry; `all_kernels` for every kernel), the base and the head version are
measured interleaved in one job on this device (`evaluate(head_spec, head, baseline=base)`; speedup =
base time / head time, so a slower head has a speedup below 1) and judged against the reference:

- the base is the target branch's tip (not the branch point, which the author chooses); which kernels a change
  touches is its own diff (branch point to head). Where the tip's test of a touched kernel differs from the
  branch point's, the head is judged under both and the stricter verdict stands;
- the test comes from the base (`base_spec.py`): the head contributes its kernel's code and nothing else; it is
  judged under the base's reference, inputs, init, shapes, tolerance, seeds, outputs, in-place inputs, backward,
  timed sets and support modules (a kernel that is its own reference is checked against its base version), so a
  change cannot make a kernel wrong and vouch for itself. A change that edits that
  test is `spec-changed` (failing, listing what changed) unless a maintainer adds the policy's
  `trust.spec_change_label`; then it is judged under the head's test too, and that verdict counts. The
  policy itself is the base's (`kforge_bot.config.policy.load_policy_from_base`);
- `incorrect`: the head's outputs do not match the oracle (or the harness rejected them);
- `error`: the head does not load, build or run; or the base failed beside it (a crash is charged to the side
  whose code crashed, and the head is then not judged: it shares the base's process and may have broken it);
- `regression`: slower than the policy's threshold t with the policy's confidence c on some shape set:
  the whole c-level interval of that set's speedup lies below 1/(1+t), i.e. head time / base time > 1 + t
  with one-sided confidence at least (1+c)/2 (each set is judged on its own, by the rule every command
  applies, kforge_bot.evaluate.wire.shapes: a set far faster cannot hide one far slower; a gate rule's
  `shape_sets` sets t per set or names a set informational, never a regression). A set whose interval
  straddles 1/(1+t) gets ONE confirmation run with three times the time budget, and the confirmation alone
  decides (a second straddle is `pass`, reported as unresolved). Since each run calls a regression on a set
  with probability at most (1-c)/2 when that set's true slowdown is within t, a false alarm happens with
  probability at most 1-c for one shape set, and at most S(1-c) for S (a union bound: many shape sets ask
  for a higher confidence or threshold);
- `improved`: the whole interval of the headline (the geometric mean over the shape sets) lies above 1+t
  and no set regressed or straddles; `pass`: anything else;
- a run too short for any interval (too few pairs in the budget) is confirmed the same way; if the
  confirmation has none either, the kernel is an `error` (it could not be judged, so it does not pass);
- `skipped`: the policy skips the kernel, or this machine has none of its targets;
- a kernel new in head has no base: it is checked against its own reference only (correctness), judged under
  its own spec, and never called `improved`.

The threshold t is the policy's for the target kind the kernel is measured on (by default 2% on
cuda/xpu/mps, 5% on cpu; `Policy.rule_for(name, path, kind)`); the report shows it per kernel.

Required targets (the policy's `required_targets`): each applies to the kernels that run on it (its
kind, or a runner class's kind, is among the kernel's targets). For each changed kernel the report
says, per applicable required target, `measured` or `skipped (needs <target>)` (this run measured
the kernel elsewhere, or not at all: a CPU-only runner and a required cuda). The exit code rule:
0 when no kernel is regression / incorrect / error, else 1; and, only with `require_all_targets`
(the policy's `gate.require_all_targets` or `--require-all-targets`), also 1 when any required
target was not measured. Without it an unmeasured required target is reported and does not fail
the run: the job on a runner that has the device measures it.

Which file does what:

- `base_spec.py`: the spec a head kernel is judged under, and what of its test a change edits;
- `decision.py`: the rule above as pure functions of plain data (`timing_decision`, `harness_verdict`,
  `exit_code`) and how a change and a threshold are written;
- `required_targets.py`: the policy's required targets, and whether a run measured each (which device kind
  a kernel is measured on is `--target`'s TargetChoice.kernel_kind, in kforge_bot.targets);
- `plan.py`: what a kernel's result depends on at a revision (its files and spec), so an unchanged
  kernel is not measured;
- `measure.py`: `compare`, the measurements of one kernel (confirmation run included);
- `report.py`: the report (`GateReport`, one `KernelReport` per kernel) as data and JSON;
- `run.py`: `run_gate`, the whole gate: two checkouts, every kernel, the result cache;
- `render.py`: the report as a console table, the job summary's Markdown, annotations and a commit status;
- `publish.py`: the gate as `kforge-bot gate` runs it (the base's policy, the spec-change label) and its report
  published where people and GitHub read it.
"""
