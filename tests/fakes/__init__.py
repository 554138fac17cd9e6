"""Test doubles that speak real wire formats over loopback HTTP."""
