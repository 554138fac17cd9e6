"""The sandboxed worker's side of the evaluation (kforge_bot.evaluate's docstring draws the wall): what only the
worker process loads, the code that imports and runs untrusted kernels. Its entry point is `entry.main`.

Imports only itself, the wire (kforge_bot.evaluate.wire) and the leaves (spec, targets, config, errors), never the
bot's side of evaluate. Kept free of imports: every module here loads this one first.
"""
