"""A stand-in kernel library with a src/ layout (tests/data/library_repo)."""
