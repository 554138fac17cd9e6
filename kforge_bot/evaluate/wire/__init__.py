"""What the bot and its sandboxed workers both load (kforge_bot.evaluate's docstring draws the wall): the formats
that cross between them and the rules both apply. Imports neither side, only itself and the leaves.

Kept free of imports: every module here loads this one first, in the worker too.
"""
