"""`kforge-bot check`: one kernel evaluated against its reference, or every kernel a repository manages
(`run.py`), and the report on the console (`render.py`)."""
