"""GitHub as the gate and the PR bot meet it, below both: the Actions environment of a step (actions), the REST
API client (client), webhook events (events) and whom the bot works for (trust). It imports neither the gate
nor the bot."""
