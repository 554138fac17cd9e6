"""The optimize loop: proposals in (the tuner or the LLM agents), evaluations, the run's trajectory and the
record folded from it, its report and the hardware counters it collects between evaluations. Imports evaluate,
agents, scale and the leaves; never the PR bot or commands."""
