"""GitHub as the gate and the PR bot meet it: the Actions environment of a step (actions)."""
