"""`agentd --help` costs what a read command costs: it lists the commands from root.SUMMARIES
without importing their modules, and says each description whole (never cut with ...). Its CPU is
measured by bench/cli_startup.py (the `agentd --help` row), never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import typer

from agentd.cli import app
from agentd.cli.root import COMMANDS, SUMMARIES

# Runs `agentd --help` through the console script's entry point in a fresh Python and prints the
# agentd.cli modules it imported, as JSON, after the help.
SCRIPT = """\
import json, sys
sys.argv = ["agentd", "--help"]
from agentd.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("agentd.cli."))))
"""


def help_run() -> tuple[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=60
    )
    text, _, modules = done.stdout.rstrip().rpartition("\n")
    return text, json.loads(modules)


def test_help_imports_no_command_module() -> None:
    _, modules = help_run()
    commands = {f"agentd.cli.{m}" for ms in COMMANDS.values() for m in ms}
    assert not commands & set(modules), sorted(commands & set(modules))


def test_help_says_each_description_whole() -> None:
    text, _ = help_run()
    listed = text[text.index("Commands:") :]
    assert "..." not in listed and "…" not in listed
    for name, summary in SUMMARIES.items():
        assert " ".join(summary.split()) in " ".join(listed.split()), name


def test_help_summaries_name_every_visible_command() -> None:
    group = typer.main.get_command(app)
    ctx = click.Context(group)
    visible = set()
    for name in COMMANDS:
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            visible.add(name)
    assert set(SUMMARIES) == visible
