"""kforge_bot.text: the clips every report line, error message and GitHub field uses."""

from kforge_bot.text import clip, markdown_cell, one_line, one_line_tail


def test_one_line_flattens_and_cuts_with_an_ellipsis() -> None:
    assert one_line("a\n  b\tc", 80) == "a b c"
    assert one_line("x" * 20, 10) == "xxxxxxx..." and len(one_line("x" * 20, 10)) == 10
    assert one_line(12345, 80) == "12345"  # anything printable


def test_one_line_tail_keeps_the_end_where_the_error_is() -> None:
    assert one_line_tail("exit\n  status 1", 80) == "exit status 1"
    assert one_line_tail("a" * 10 + "boom", 4) == "...boom"


def test_clip_cuts_to_the_limit_with_one_ellipsis_character() -> None:
    assert clip("short", 140) == "short"
    cut = clip("x" * 300, 140)
    assert len(cut) == 140 and cut.endswith("x…")
    assert clip("y" * 140, 140) == "y" * 140  # exactly the limit: untouched


def test_markdown_cell_escapes_what_would_break_a_table_row() -> None:
    assert markdown_cell("a|b\\c\nd") == "a\\|b\\\\c d"
    assert markdown_cell(1.5) == "1.5"
