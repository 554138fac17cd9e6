"""The repository's settings: the policy (policy.py: gate rules, budgets, targets, and what one evaluation is
given, eval_settings.py's EvalSettings), its JSON Schema (schema.py) and the strict YAML reader both use
(yamlcheck.py). A leaf: it imports nothing of the harness."""
