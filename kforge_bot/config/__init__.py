"""The repository's settings: the policy (policy.py: gate rules, budgets, targets), its JSON Schema (schema.py)
and the strict YAML reader both use (yamlcheck.py). A leaf: it imports nothing of the harness."""
