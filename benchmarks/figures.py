"""One figure of a side-by-side benchmark (bench_floor.py): its targets run in
rotating order, round after round, their rates and the CPU their daemons spent."""

from __future__ import annotations

import contextlib
import os
import statistics
from pathlib import Path

from bench_legacy import cpu_seconds


class Figure:
    """One figure: its targets' runs (each returns seconds), the amount of work of
    a run in ``unit``, and the daemons whose CPU is counted."""

    def __init__(self, label: str, unit: str, amount: float, cpu_unit: str, per: float):
        self.label, self.unit, self.amount = label, unit, amount
        self.cpu_unit, self.per = cpu_unit, per  # CPU seconds x per / amount
        self.runs: dict[str, object] = {}
        self.pids: dict[str, int] = {}
        self.rates: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def target(self, name: str, run, pid: int | None = None) -> None:
        self.runs[name] = run
        if pid is not None:
            self.pids[name] = pid

    def measure(self, rounds: int, prepare=None) -> Figure:
        """``rounds`` runs of every target, in rotating order; ``prepare()``, if
        given, before each run, untimed."""
        names = list(self.runs)
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                if prepare is not None:
                    prepare()
                pid = self.pids.get(name)
                before = DaemonCpu(pid) if pid else None
                seconds = self.runs[name]()
                self.rates.setdefault(name, []).append(self.amount / seconds)
                if before is not None:
                    spent = before.since()
                    self.cpu.setdefault(name, []).append(spent * self.per / self.amount)
        return self

    def median(self, name: str, cpu: bool = False) -> float:
        return statistics.median((self.cpu if cpu else self.rates)[name])

    def rows(self) -> list[str]:
        out = [f"| {self.label} | {self.unit} | daemon CPU, {self.cpu_unit} |", "|---|---|---|"]
        for name, values in self.rates.items():
            rate = f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"
            cpu = self.cpu.get(name)
            spent = f"{statistics.median(cpu):.2f} ({min(cpu):.2f}–{max(cpu):.2f})" if cpu else ""
            out.append(f"| {name} | {rate} | {spent} |")
        return out


class DaemonCpu:
    """The CPU time a daemon spends from now to `since`. In nanoseconds from each
    thread's /proc/<pid>/task/<tid>/schedstat when the same threads lived at both
    ends; else (a thread came or went, and took its time with it) in clock ticks
    from /proc/<pid>/stat, which counts exited threads too."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.threads, self.ticks = self.per_thread(), cpu_seconds(pid)

    def per_thread(self) -> dict[str, int]:
        out = {}
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                out[tid] = int(
                    Path(f"/proc/{self.pid}/task/{tid}/schedstat").read_text().split()[0]
                )
        return out

    def since(self) -> float:
        ticks, threads = cpu_seconds(self.pid), self.per_thread()
        if threads.keys() == self.threads.keys():
            return sum(threads.values()) / 1e9 - sum(self.threads.values()) / 1e9
        return ticks - self.ticks
