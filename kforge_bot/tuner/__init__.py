"""The built-in tuner: a search over a kernel's own tunable parameters, with no model (sites.py finds them,
tunables.py rewrites them, search.py walks them)."""
