"""Progress of the command line's long work (``check``, ``check --repair``,
``compact``, ``dump`` of a large file, the wait for a mount's recovery), on
stderr: a `tqdm` bar on a terminal, plain lines at most every few seconds
otherwise (a log, a pipe), nothing with ``--quiet``. stdout keeps the results
alone, so ``logfs check DATA > problems.txt`` shows the bar and saves only the
problems."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm

PLAIN_EVERY = 5.0  # seconds between two plain lines


class Progress:
    """``total`` units of work (None: unknown) called ``what``, counted in ``unit``.

    Args:
        what: what the work is, the start of every line (``check DATA``).
        total: how many units there are, if known.
        unit: their name (``partition``, ``B`` for bytes: shown scaled).
        quiet: show nothing.
        stream: where to show it (stderr).
        bar: a bar, or plain lines; by default a bar when ``stream`` is a terminal.
    """

    def __init__(
        self,
        what: str,
        total: int | None,
        unit: str = "partition",
        *,
        quiet: bool = False,
        stream: TextIO | None = None,
        bar: bool | None = None,
    ) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.stream = sys.stderr if stream is None else stream
        self.quiet = quiet
        self.done = 0
        self.note = ""
        self.started = self.shown = time.monotonic()
        if bar is None:
            bar = self.stream.isatty()
        self.bar = None
        if bar and not quiet:
            self.bar = tqdm(
                total=total, desc=what, unit=unit, file=self.stream, leave=True,
                unit_scale=unit == "B", dynamic_ncols=True,
            )  # fmt: skip

    def advance(self, amount: int = 1, note: str = "") -> None:
        """``amount`` more units done; ``note`` says what was done last (a partition's name)."""
        self.done += amount
        self.note = note
        if self.quiet:
            return
        if self.bar is not None:
            if note:
                self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(amount)
        elif time.monotonic() - self.shown >= PLAIN_EVERY:
            self._line()

    def report(self, done: int, total: int, note: str = "") -> None:
        """``done`` of ``total`` units: the form the core's long work reports in
        (a new ``total`` starts the count again: ``check --repair``'s second pass)."""
        if total != self.total or done < self.done:
            if self.total is not None and self.done and not self.quiet and self.bar is None:
                self._line()
            self.total, self.done = total, 0
            self.started = time.monotonic()
            if self.bar is not None:
                self.bar.reset(total=total)
        self.advance(done - self.done, note)

    def close(self) -> None:
        """The work is over: the bar's last state, or a last plain line."""
        if self.bar is not None:
            self.bar.close()
        elif not self.quiet and self.done:
            self._line()

    def _line(self) -> None:
        self.shown = time.monotonic()
        seconds = self.shown - self.started
        done = _amount(self.done, self.unit)
        if self.total:
            done += f" of {_amount(self.total, self.unit)} ({100 * self.done / self.total:.0f}%)"
        note = f", last {self.note}" if self.note else ""
        print(f"{self.what}: {done} in {seconds:.1f} s{note}", file=self.stream, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _amount(count: int, unit: str) -> str:
    if unit == "B":
        return f"{count / 1e6:.1f} MB"
    return f"{count} {unit}{'s' if count != 1 else ''}"
