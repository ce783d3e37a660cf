"""trocket.progress.ProgressLine: known and unknown totals, terminal-only, throttled."""

from __future__ import annotations

import io

from trocket.progress import ProgressLine


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_known_total_draws_a_bar_with_extra_and_rate():
    out = Tty()
    p = ProgressLine(10, stream=out, interval=0.0)
    assert p.on
    p.update(5, "failed 1")
    p.close()
    text = out.getvalue()
    assert text.startswith("\r[" + "#" * 15 + "." * 15 + "] 5/10  failed 1  ")
    assert text.endswith(" msg/s \n")
    # more than the total (a retry counted twice) fills the bar, never past it
    assert ProgressLine(4, enabled=True).render(6).startswith("[" + "#" * 30 + "] 6/4")


def test_unknown_total_counts():
    for total in (None, 0):
        p = ProgressLine(total, label="consumed", enabled=True)
        assert p.render(1234, now=p.begin + 2.0) == "1,234 consumed  617 msg/s "


def test_silent_when_not_a_terminal_or_disabled():
    out = io.StringIO()  # isatty() is False
    p = ProgressLine(10, stream=out, interval=0.0)
    p.update(3, force=True)
    p.close()
    off = Tty()
    q = ProgressLine(10, stream=off, enabled=False)
    q.update(3, force=True)
    q.close()
    assert out.getvalue() == "" and off.getvalue() == "" and not p.on


def test_updates_are_throttled_but_forced_ones_draw():
    out = Tty()
    p = ProgressLine(100, stream=out, interval=3600.0)
    p.update(1)
    p.update(2)  # within the interval: skipped
    p.update(3, force=True)
    assert out.getvalue().count("\r") == 2 and "] 3/100" in out.getvalue()
    p.close()
    p.close()  # closing twice ends the line once
    assert out.getvalue().count("\n") == 1


def test_close_without_a_draw_writes_nothing():
    out = Tty()
    ProgressLine(5, stream=out).close()
    assert out.getvalue() == ""


def test_custom_text_and_clearing_close():
    out = Tty()
    p = ProgressLine(200, stream=out, interval=0.0, text=lambda pos: f"  f: {100 * pos / 200:.0f}%")
    p.update(50)
    p.close(clear=True)  # erased (a problem line printed next starts clean) ...
    p.update(100)  # ... and drawn again afterwards
    p.close(clear=True)
    assert out.getvalue() == "\r  f: 25%\r\x1b[K\r  f: 50%\r\x1b[K"
