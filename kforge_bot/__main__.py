"""`python -m kforge_bot`: the same CLI as the `kforge-bot` script (for machines where it is not installed)."""

from kforge_bot.cli import run

if __name__ == "__main__":
    run()
