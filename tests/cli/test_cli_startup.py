"""The CLI starts like a tool: a read command imports neither the daemon, nor the web stack, nor an
SDK (MCP, Anthropic, OpenAI). Each command runs in a fresh Python, as the console script runs it;
how long that takes is measured by bench/cli_startup.py, never asserted here."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

import agentd.cli
from agentd import config
from agentd.cli import app
from agentd.cli.root import COMMANDS
from agentd.db import items as qi
from agentd.db.store import SyncStore
from agentd.models import InboxKind

# What a read command must not import: the daemon (which pulls everything below), the MCP SDK, the
# model SDKs and the web stack (the daemon's API and web inbox serve them).
HEAVY = ("agentd.daemon", "mcp", "anthropic", "openai", "uvicorn", "starlette")

# Runs `agentd ARGS…` through the console script's entry point in this process, then writes which
# of the packages named second (comma-separated) it imported, as JSON, to the file named first.
SCRIPT = """\
import json, sys
from pathlib import Path
out, heavy, args = Path(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:]
sys.argv = ["agentd", *args]
from agentd.cli import main
try:
    main()
except SystemExit as e:
    if e.code not in (0, None):
        raise
loaded = [h for h in heavy if any(m == h or m.startswith(h + ".") for m in sys.modules)]
out.write_text(json.dumps(loaded))
"""

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "ask", "finish"]
"""


def imported(home: Path, packages: tuple[str, ...], *args: str) -> list[str]:
    """Which of `packages` `agentd --home HOME ARGS…` imports, run in a fresh Python."""
    out = home.parent / "imported.json"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(out), ",".join(packages), "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(out.read_text())
    return loaded


READS = [
    ("--version",), ("inbox", "list", "--json"), ("inbox", "list"), ("inbox", "show", "1"),
    ("goal", "list"), ("goal", "show", "1"), ("runs", "list"), ("event", "list"), ("status",),
]  # fmt: skip


def _arranged(home: Any) -> None:
    home.write_config(CONFIG, [])
    goal_id = home.add_goal(title="Keep checkout healthy")  # opening the store migrates it
    home.start_run(goal_id)
    home.store.write(lambda c: qi.post(c, InboxKind.QUESTION, title="why?", goal_id=goal_id))
    home.close()


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_read_command_imports_no_daemon_web_stack_or_sdk(home: Any, args: tuple[str, ...]) -> None:
    _arranged(home)

    assert imported(home.root, HEAVY, *args) == []


@pytest.mark.parametrize("args", [("inbox", "list", "--json"), ("goal", "list")], ids=" ".join)
def test_list_commands_import_no_pydantic_logging_loop_or_http(
    home: Any, args: tuple[str, ...]
) -> None:
    # what bench/cli_startup.py measures: the config's models and typer's converters (pydantic),
    # the writer thread's logging (structlog, rich), asyncio and http.client (ssl) are not needed
    # to list rows; `--home PATH` is converted without pydantic too
    _arranged(home)
    costly = (
        "pydantic",
        "structlog",
        "rich",
        "asyncio",
        "http.client",
        "ssl",
        "agentd.config.file",
    )

    assert imported(home.root, costly, *args) == []


def test_a_plain_approve_imports_neither_the_harness_nor_the_configs_models(home: Any) -> None:
    # the decision every page asks for: granting the exact action stored needs no action menu
    # (only --edit validates arguments against its schema), so it starts as `inbox list` does
    home.write_config(CONFIG, [])
    goal_id = home.add_goal()
    run_id = home.start_run(goal_id)
    item_id = home.store.write(
        lambda c: qi.post(
            c, InboxKind.APPROVAL, title="restart?", goal_id=goal_id, run_id=run_id, seq=1,
            action="restart", args={"unit": "checkout"}, digest="d1",
        )
    )  # fmt: skip
    home.close()
    costly = (*HEAVY, "agentd.harness", "agentd.actions", "pydantic", "agentd.config.file")

    assert imported(home.root, costly, "inbox", "approve", str(item_id)) == []
    store = SyncStore(home.paths.db)
    try:
        assert store.read(lambda c: qi.get_item(c, item_id)).status == "approved"
    finally:
        store.close()


def test_version_imports_no_command_nor_the_configs_models(home: Any) -> None:
    # --version needs typer and the root group only: no command's module, no pydantic (the
    # config's models), no structlog (which imports rich), no database
    light = ("agentd.cli.admin", "agentd.cli.goals", "agentd.operator", "agentd.db", "pydantic",
             "structlog", "sqlite3")  # fmt: skip
    home.root.mkdir(parents=True)

    assert imported(home.root, light, "--version") == []


def test_every_command_the_cli_defines_is_one_the_root_loads() -> None:
    for module in pkgutil.iter_modules(agentd.cli.__path__):
        importlib.import_module(f"agentd.cli.{module.name}")
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)

    assert set(group.commands) == set(COMMANDS)


def test_the_config_package_gives_every_name_it_declares_from_its_module() -> None:
    # agentd.config loads its tables' models lazily (for mypy, they are imported under
    # TYPE_CHECKING): every name declared there must still be the module's own object
    source = Path(config.__file__).read_text()
    declared = [
        (node.module, alias.name)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentd.config.")
        for alias in node.names
    ]
    assert len(declared) > 50

    for module, name in declared:
        assert getattr(config, name) is getattr(importlib.import_module(module), name), name


# Runs `agentd ARGS…` as the console script does, then logs a warning and a debug line as one of
# the modules the command imported would (a command that imports none has nothing to set up).
LOGGING_SCRIPT = """\
import sys
sys.argv = ["agentd", *sys.argv[1:]]
from agentd.cli import main
try:
    main()
except SystemExit:  # doctor exits 1 when a check fails: the output is still its report
    pass
import structlog
structlog.get_logger("probe").warning("probe.warning")
structlog.get_logger("probe").debug("probe.debug")
"""


# `artifact list` imports what logs (the build's model calls) with its command's module; doctor imports
# the model adapters and source probes inside the command.
@pytest.mark.parametrize(
    "args", [("artifact", "list", "--json"), ("doctor", "--json")], ids=" ".join
)
def test_console_script_sends_library_log_lines_to_stderr(home: Any, args: tuple[str, ...]) -> None:
    home.write_config(CONFIG, [])
    home.add_goal()
    home.close()
    done = subprocess.run(
        [sys.executable, "-c", LOGGING_SCRIPT, "--home", str(home.root), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)  # the command's output, and only it
    assert "probe.warning" in done.stderr
    assert "probe.debug" not in done.stderr + done.stdout


def test_a_group_gets_every_module_that_adds_to_it_whatever_was_loaded_before() -> None:
    # `goal` comes from cli/goals.py, `goal schedule|cadence|snooze` from cli/checkins.py; a
    # fresh interpreter that had imported only the first (another command, a test) once
    # answered "No such command 'schedule'".
    code = (
        "import agentd.cli.goals\n"
        "from typer.testing import CliRunner\n"
        "from agentd.cli.root import app\n"
        "r = CliRunner().invoke(app, ['goal', 'schedule', '--help'])\n"
        "print(r.exit_code)\n"
        "print(r.output)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("0\n"), done.stdout
    assert "schedule" in done.stdout
