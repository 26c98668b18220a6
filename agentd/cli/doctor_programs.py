"""`agentd doctor`'s look at the programs command actions and command sources will exec: found on
the PATH they will run with, and executable by the user the daemon runs as.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from agentd import config
from agentd.config import CommandAction, CommandSource, Config
from agentd.views.records import Check

# ── programs: what command actions and command sources will exec ─────────────────────────────


Identity = tuple[int, set[int]]  # effective uid, and every gid of the process


def identity(pid: int | None) -> Identity | None:
    """The daemon's user and groups (from /proc), or None: then this process's are used."""
    if pid is None or pid <= 0:
        return None
    try:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        uid = int(fields["Uid"].split()[1])
        gids = {int(fields["Gid"].split()[1]), *map(int, fields.get("Groups", "").split())}
    except (OSError, KeyError, ValueError, IndexError):
        return None
    return uid, gids


def may_execute(path: Path, who: Identity | None) -> bool:
    """Whether `who` (None: this process) may execute the file `path` (by its mode bits)."""
    if who is None:
        return os.access(path, os.X_OK)
    st = path.stat()
    uid, gids = who
    if uid == 0:
        return bool(st.st_mode & 0o111)
    if st.st_uid == uid:
        return bool(st.st_mode & 0o100)
    return bool(st.st_mode & (0o010 if st.st_gid in gids else 0o001))


def find_program(argv0: str, path_var: str, cwd: Path | None) -> Path | None:
    """Where exec will find `argv0`: as a path (relative to `cwd`), else on `path_var`."""
    if "/" in argv0:
        found = (cwd or Path.cwd()) / argv0
        return found if found.is_file() else None
    hit = shutil.which(argv0, mode=os.F_OK, path=path_var)
    return Path(hit) if hit else None


def used(cfg: Config) -> tuple[set[str], set[str]]:
    """The actions and sources some agent uses: only their failures fail doctor (an example
    table no agent names yet is reported, not held against the home)."""
    actions = {a for agent in cfg.agents.values() for a in agent.actions}
    return actions, {s for agent in cfg.agents.values() for s in agent.sources}


def _programs(
    cfg: Config,
) -> Iterator[tuple[str, list[str], dict[str, str], Path | None, bool]]:
    actions, sources_used = used(cfg)
    for name, action in cfg.actions.items():
        if isinstance(action, CommandAction):
            yield f"action {name}", action.argv, action.env, action.cwd, name in actions
            if action.verify_argv:
                yield (f"action {name} verify", action.verify_argv, action.env, action.cwd,
                       name in actions)  # fmt: skip
    for name, source in cfg.sources.items():
        if isinstance(source, CommandSource):
            yield f"source {name}", source.argv, {}, None, name in sources_used


def check_programs(cfg: Config, who: Identity | None) -> list[Check]:
    """argv[0] of every command action, verify command and command source exists and is
    executable by the daemon's user (from /proc when it runs; else by whoever runs doctor)."""
    base_path = config.base_env()["PATH"]
    user = "the daemon's user" if who is not None else "this user"
    checks = []
    for label, argv, env, cwd, in_use in _programs(cfg):
        name = f"program {label.removeprefix('action ').removeprefix('source ')}"
        where = env.get("PATH", base_path)
        found = find_program(argv[0], where, cwd)
        unused = "" if in_use else " (no agent uses it yet)"
        if found is None:
            msg = f"{label}: {_not_found(argv[0], where, cwd)}"
            checks.append(Check(name, False, msg + unused, in_use))
        elif not may_execute(found, who):
            msg = f"{label}: {found} is not executable by {user}"
            checks.append(Check(name, False, msg + unused, in_use))
        else:
            checks.append(Check(name, True, f"{label}: {found}"))
    return checks


def _not_found(argv0: str, path_var: str, cwd: Path | None) -> str:
    """Why exec would not find `argv0`, in the words that fit how it was written."""
    if argv0.startswith("/"):
        there = Path(argv0)
        if there.is_dir():
            return f"{argv0} is a folder, not a program; name the program inside it"
        return f"{argv0} does not exist; install it there or correct the path"
    if "/" in argv0:
        return (f"{argv0!r} not found in {cwd or 'the current folder'}; give its full path or "
                "set cwd")  # fmt: skip
    return f"{argv0!r} not found on PATH={path_var}; install it or give its full path"
