"""kforge_bot.text: the one clip every report line uses."""

from kforge_bot.text import one_line


def test_one_line_flattens_and_cuts_with_an_ellipsis() -> None:
    assert one_line("a\n  b\tc", 80) == "a b c"
    assert one_line("x" * 20, 10) == "xxxxxxx..." and len(one_line("x" * 20, 10)) == 10
    assert one_line(12345, 80) == "12345"  # anything printable
