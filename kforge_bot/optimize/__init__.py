"""The optimize loop: proposals in, evaluations, the run's record (trajectory), its report and the hardware
counters it collects between evaluations. Imports evaluate, agents and the leaves; never the PR bot or commands."""
