# This folder is a kernel library that `kforge-bot init` reads as text; its tests are data, not kforge's tests.
collect_ignore_glob = ["tests/*", "mylib/*"]
