"""The performance history of a repository's main line: what `track`, `bisect`, `history` and acknowledgements
read and write.

- `store.py`: the history itself, plain JSON files on a ref of the repository's own (refs/kforge/history), laid out
  as asv keeps its results (one file per commit and runner), appended with a retry when a concurrent push won;
- `runner.py`: the facts of the machine a record was measured on (device, driver, torch and Triton, the harness);
- `track.py`: one commit's measurement of every managed kernel, through the gate's evaluation path;
- `series.py`: the records as series, one per (kernel, shape set, direction, target, runner);
- `changes.py`: change points in a series (the `ruptures` library finds them; the policy's threshold keeps those
  that matter), acknowledged ones marked;
- `confirm.py`: a change point re-measured, the commits on each side interleaved, through the gate's `compare`;
- `bisect.py`: the first commit where a kernel regressed past the threshold, by the gate run commit by commit;
- `acks.py`: acknowledgements (who, why) stored on the history ref;
- `alerts.py`: one GitHub issue per confirmed, unacknowledged change point (or a comment on the open one);
- `dashboard.py`: a static HTML site, one page per kernel.
"""
