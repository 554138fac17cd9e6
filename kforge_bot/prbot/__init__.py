"""The pull-request bot: GitHub's API and webhook events, who the bot works for (trust), the follow-up PR's
evidence, and the run over a pull request's changed kernels. Imports optimize, evaluate and the leaves."""
