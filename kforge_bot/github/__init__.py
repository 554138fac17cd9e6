"""GitHub as the gate and the PR bot meet it: the REST API client (client), the Actions environment of a step
(actions)."""
