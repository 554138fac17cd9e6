"""Scaling out: many candidates evaluated at once (a pool of device slots on one host, or Ray across hosts).

Kept import-light: nothing here imports torch or ray at module level.
"""

from __future__ import annotations
