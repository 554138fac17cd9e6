"""Hardware counters: Nsight Compute (ncu*) on CUDA and unitrace (unitrace*) on Intel XPU, each running the kernel
once under the profiler (profiled_run.py starts profiled_worker.py in the sandbox). Read between evaluations by
the loop, the doctor and the PR bot; the judge (kforge_bot.evaluate) never imports them."""
