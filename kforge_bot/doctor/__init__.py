"""`kforge-bot doctor`: what this machine has, what works, and its measured ceilings.

Two halves. The parent (the CLI) probes tools with subprocesses and never imports torch, so a
broken driver cannot take it down. The measurements (device, profiler, copy bandwidth, matmul
FLOP/s) run in a child, `python -m kforge_bot.doctor measure ...`, which writes JSON to a file
(torch and its profiler print to stdout). The parent compares the child's figures with the runner's
stated facts and can save them as this machine's roofline (`kforge_bot.hardware.ceilings_for`).

Sizes: copies of 1 GiB on a GPU (256 MiB on a CPU) so caches do not help, and 8192^3 matmuls on a
GPU (2048^3 on a CPU), like the project's reference measurements. `--quick` (or
KFORGE_DOCTOR_QUICK=1) uses tiny sizes so tests run in seconds; its figures are not ceilings and
it refuses `--save`.

Which file does what:

- `probes.py`: the parent's probes, subprocesses only: tools on PATH, perf counters, hardware counters
  (ncu, unitrace) and the workers' sandbox;
- `measure.py`: the child (`python -m kforge_bot.doctor measure`, `__main__.py`): the device, the profiler,
  copy bandwidth and matmul FLOP/s, with torch;
- `report.py`: the parent's report: runs the child, compares its figures with the runner's stated facts,
  lists what is missing, and saves the ceilings.
"""
