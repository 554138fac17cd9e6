"""kforge_bot.text: the clips every report line, error message and GitHub field uses."""

from kforge_bot.text import clip, fmt_time, markdown_cell, one_line, one_line_tail


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


# ---------------------------------------------------------------- what a pull request wrote (issue 28, class 9)


def test_no_line_becomes_a_workflow_command() -> None:
    import io

    from kforge_bot.text import WorkflowCommandGuard, no_workflow_commands

    hostile = "ok\n::error::a\n  ::add-mask::b\r::stop-commands::c\nmid ::fine\nx ##[error]v1\n"
    safe = no_workflow_commands(hostile)
    lines = safe.replace("\r", "\n").split("\n")
    assert not any(line.lstrip().startswith("::") for line in lines) and "##[" not in safe
    assert safe.replace("\u200b", "") == hostile  # the text reads the same
    out = io.StringIO()
    guard = WorkflowCommandGuard(out)
    for piece in ("a\n", ":", ":error", "::x\n", "b ##", "[error]\n", "progress "):  # split anywhere, flushed anywhere
        guard.write(piece)
        guard.flush()
    guard.write("::fine\n")  # mid-line: no command
    guard.command("::error file=k.py::the bot's own ##[annotation]")
    guard.write("  ::x")
    guard.finish()
    lines = out.getvalue().split("\n")
    assert lines[-2] == "::error file=k.py::the bot's own #\u200b#[annotation]"
    assert [l for l in lines if l.lstrip().startswith("::")] == [lines[-2]] and "##[" not in out.getvalue()
    assert out.getvalue().replace("\u200b", "").startswith("a\n::error::x\nb ##[error]\nprogress ::fine\n")
    try:
        guard.write(b"bytes")  # type: ignore[arg-type]
    except TypeError:
        pass
    else:
        raise AssertionError("the guard took bytes")
    assert not hasattr(guard, "buffer")  # no way around it through the binary stream


def test_code_span_and_markdown_text_render_nothing_live() -> None:
    from kforge_bot.text import code_span, markdown_text

    assert code_span("a `b` c") == "``a `b` c``" and code_span("`x") == "`` `x ``"
    assert markdown_text("0.01, 3 seeds (by dtype)") == "0.01, 3 seeds (by dtype)"  # plain text stays plain
    for hostile in ("![x](https://e.example/t.png)", "@team", "<img src=x>", "see https://e.example", "*bold*"):
        assert markdown_text(hostile) == code_span(hostile)


def test_a_flush_after_other_blanks_starts_no_workflow_command() -> None:
    # The runner trims every Unicode blank (.NET's TrimStart: no-break space, vertical tab, U+2028, U+0085...) before
    # it looks for `::`, so a line that is only such blanks when flushed can still become a command.
    import io

    from kforge_bot.text import WorkflowCommandGuard

    for blank in ("\u00a0", "\x0b", "\x0c", "\u2028", "\x85", "\u3000", " \u00a0:"):
        out = io.StringIO()
        guard = WorkflowCommandGuard(out)
        guard.write(blank)
        guard.flush()
        guard.write(":" if blank.endswith(":") else "::")
        guard.flush()
        guard.write("error::forged\n")
        guard.finish()
        lines = out.getvalue().split("\n")
        assert not any(line.lstrip().startswith("::") for line in lines), (blank, out.getvalue())


def test_markdown_text_leaves_nothing_github_autolinks() -> None:
    """Red-team pass: plain letters, digits and dashes still linked. A commit subject `fix GH-1`, quoted in the
    regression issue (kforge_bot.history.alerts), rendered as a link to issue 1; a run of hex digits as a link to a
    commit; `TICKET-12` through a repository's autolink prefix. Each is a code span now."""
    from kforge_bot.text import code_span, markdown_text

    for hostile in ("fix GH-1", "see gh-12 first", "revert 1a2b3c4d", "undo 0123456789abcdef0123456789abcdef01234567",
                    "closes TICKET-12"):
        assert markdown_text(hostile) == code_span(hostile), hostile
    for plain in ("0.01, 3 seeds (by dtype)", "softmax-v2 fast path", "threshold 25.0% (cpu)", "n=4096, -3.2%"):
        assert markdown_text(plain) == plain, plain


def test_fmt_time_picks_the_unit_and_three_figures() -> None:
    assert fmt_time(0.412) == "412 us"
    assert fmt_time(0.0412) == "41.2 us"
    assert fmt_time(1.31) == "1.31 ms"
    assert fmt_time(2500) == "2.50 s"
    assert fmt_time(None) == "n/a" and fmt_time(float("nan")) == "n/a"
