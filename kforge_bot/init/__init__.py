"""`kforge-bot init`: a library read as text (`scan/`), a manifest proposed from it, and the writing of
kforge.yaml beside the library."""
