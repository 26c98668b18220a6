"""CLI start-up: the CPU a read command costs, as a ratio to a bare `python -c "import typer"`.

    bench/cli_startup.py --reps N --warmup W --workdir DIR

Builds a home (`agentd init`, one goal), then runs, N times over and interleaved so drift hits all
alike, `python -c "import typer"` and five commands as an operator types them: `agentd --version`,
`agentd --help`, `agentd inbox list --json`, `agentd goal list` and a decision, `agentd inbox
approve 999` (an id the home does not have: it exits 1 after loading the config and looking).
Each process's user+sys CPU comes from the kernel's accounting of the child (getrusage); one RESULT
line per command, then the ratios (target ≤ 3x).
The children write bytecode caches as an installed tool does, whatever PYTHONDONTWRITEBYTECODE says
here (without them every start compiles the modules it imports, and that is what gets measured).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BASELINE = "import typer"
NO_ITEM = 999  # `inbox approve` of an id the home does not have
EXIT_CODES = {"agentd inbox approve": 1}  # its "no inbox item 999" (every other command: 0)


def agentd_argv() -> list[str]:
    """The console script beside this Python (what an operator runs), else `python -m agentd`."""
    script = Path(sys.executable).parent / "agentd"
    return [str(script)] if script.exists() else [sys.executable, "-m", "agentd"]


def commands(home: Path) -> dict[str, list[str]]:
    agentd = agentd_argv()
    at = ["--home", str(home)]
    return {
        BASELINE: [sys.executable, "-c", "import typer"],
        "agentd --version": [*agentd, "--version"],
        "agentd --help": [*agentd, "--help"],
        "agentd inbox list --json": [*agentd, *at, "inbox", "list", "--json"],
        "agentd goal list": [*agentd, *at, "goal", "list"],
        # A decision: the home has no item 999, so nothing is approved and the command exits 1
        # after loading config.toml (pydantic) and the lookup: what a decision costs to start.
        "agentd inbox approve": [*agentd, *at, "inbox", "approve", str(NO_ITEM)],
    }


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cpu_s(argv: list[str], exit_code: int = 0) -> tuple[float, float]:
    """(user+sys CPU, wall) seconds of one run of `argv`, which must exit `exit_code`. Runs are
    serial, so the growth of the children's rusage is exactly this child's."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=child_env())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != exit_code or "Traceback" in done.stderr:
        sys.exit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, wall


def make_home(workdir: Path) -> Path:
    home = workdir / "home"
    agentd = agentd_argv()
    for args in (["init"], ["goal", "add", "Keep checkout healthy", "--why", "revenue"]):
        argv = [*agentd, "--home", str(home), *args]
        done = subprocess.run(argv, capture_output=True, text=True, env=child_env())
        if done.returncode != 0:
            sys.exit(f"agentd {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return home


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=Path(".bench"))
    a = ap.parse_args()
    workdir = a.workdir / "cli-startup"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    runs = commands(make_home(workdir))

    for _ in range(a.warmup):  # bytecode caches written, files in the page cache
        for name, argv in runs.items():
            cpu_s(argv, EXIT_CODES.get(name, 0))
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    wall: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(a.reps):
        for name, argv in runs.items():
            used, took = cpu_s(argv, EXIT_CODES.get(name, 0))
            cpu[name].append(used)
            wall[name].append(took)

    # Each repetition's command is compared with the same repetition's baseline: the machine's
    # load drifts, and a ratio of figures taken minutes apart would measure the drift.
    ratios: dict[str, float] = {}
    for name in runs:
        paired = [c / max(b, 1e-6) for c, b in zip(cpu[name], cpu[BASELINE], strict=True)]
        ratios[name] = statistics.median(paired)
        print("RESULT " + json.dumps({
            "command": name if name != BASELINE else f'python -c "{BASELINE}"', "reps": a.reps,
            "median_cpu_ms": round(statistics.median(cpu[name]) * 1e3, 1),
            "min_cpu_ms": round(min(cpu[name]) * 1e3, 1),
            "max_cpu_ms": round(max(cpu[name]) * 1e3, 1),
            "median_wall_ms": round(statistics.median(wall[name]) * 1e3, 1),
            "ratio_to_import_typer": round(ratios[name], 2),
        }), flush=True)  # fmt: skip
    figures = " ".join(
        f"{name.removeprefix('agentd ').replace(' --', '_').replace(' ', '_').strip('-')}"
        f"={ratios[name]:.2f}x"
        for name in runs
        if name != BASELINE
    )
    worst = max(ratio for name, ratio in ratios.items() if name != BASELINE)
    print(
        f"SUMMARY import_typer_cpu_ms={statistics.median(cpu[BASELINE]) * 1e3:.1f} {figures} "
        f"max_ratio={worst:.2f}x (median of paired CPU ratios; target ≤ 3x)"
    )


if __name__ == "__main__":
    main()
