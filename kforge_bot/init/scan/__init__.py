"""A kernel library read as text: its modules and imports (`modules.py`), other vendors' backend folders
(`vendors.py`), its Triton kernels and the public launchers that reach them (`launchers.py`), and the
references and sizes its own tests use (`from_tests.py`). `kforge-bot init` proposes a manifest from these.

Nothing here imports the library: every file is parsed with `ast`.
"""
