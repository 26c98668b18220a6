"""Text from a model or the world cannot fake what the operator sees: every view escapes control,
bidi and invisible characters, marks each written line, and shows an approval's real action last."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from typer.testing import CliRunner, Result

from agentd import log
from agentd.cli import app
from agentd.db import items as qi
from agentd.db import leases
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.models import InboxKind, RunStatus, Step, StepKind, StepStatus, action_digest, utcnow
from agentd.text import CONTINUATION, safe
from agentd.views import records
from agentd.views import runs as render_runs

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "ask", "finish"]
"""

# What a hostile reason does on a terminal: clear the screen, home the cursor, then draw a fake view.
CLEAR = "\x1b[2J\x1b[H"
FORGED = 'arguments:  {"version": "v1.4.2"}'
FORGED_NEXT = "next: agentd inbox approve 1 --note forged"
HOSTILE = f"routine upgrade{CLEAR}\n{FORGED}\n{FORGED_NEXT}\x9b31m\u202e1.0.0v\u202c\u200b"
REAL_ARGS = {"version": "v0.0.1"}

# Whatever reaches the terminal: no C0 control but newline, no DEL or C1, no bidi or zero-width.
UNSAFE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)


@pytest.fixture
def cli_home(home: Any) -> Any:
    home.write_config(CONFIG, [])
    home.store  # noqa: B018  # opening the store creates and migrates the database
    return home


def agentd(root: Path, *args: str) -> Result:
    """Run the CLI as on a terminal: color=True stops click stripping ANSI sequences from output."""
    result = CliRunner().invoke(app, ["--home", str(root), *args], color=True)
    assert result.exit_code == 0, result.output
    return result


def assert_inert(text: str) -> None:
    """Nothing in `text` can drive a terminal or hide characters, and no forged line starts a line."""
    assert not UNSAFE.search(text), repr(UNSAFE.search(text))
    forged = [line for line in text.splitlines() if line.startswith((FORGED, FORGED_NEXT))]
    assert forged == []


def hostile_approval(home: Any) -> int:
    goal_id = home.add_goal(title=f"Keep it up{CLEAR}")
    run_id = home.start_run(goal_id)
    body = f"The run proposes deploy.\nReason given: {HOSTILE}"
    return int(
        home.store.write(
            lambda c: qi.post(
                c, InboxKind.APPROVAL, title=f"approve deploy?{CLEAR}", body=body, run_id=run_id,
                goal_id=goal_id, action="deploy", args=REAL_ARGS, digest=action_digest("deploy", REAL_ARGS),
                rule="policy: deploy = approve",
                data={"reason": HOSTILE, "resolved": {"argv": ["deploy.sh", "v0.0.1"]}},
            )
        )
    )  # fmt: skip


# ── safe() ────────────────────────────────────────────────────────────────────────────────────


def test_safe_escapes_controls_bidi_and_invisible_characters_visibly() -> None:
    text = safe("a\x1b[2Jb\x9bc\u202ed\u200be\x07f\x08g\rh\x7fi\U000e0041j\u3164k")
    assert text == ("a\\x1b[2Jb\\x9bc\\u202ed\\u200be\\x07f\\x08g\\rh\\x7fi\\U000e0041j\\u3164k")


def test_safe_keeps_ordinary_text_as_it_is() -> None:
    text = "Déploiement prévu — ok ✓ 日本語 🙂 a\\b"
    assert safe(text) == text


def test_safe_leaves_no_unprintable_code_point_unescaped() -> None:
    every = "".join(map(chr, range(0x110000)))
    assert safe(every).isprintable()


def test_safe_shows_newlines_on_one_line_unless_multiline() -> None:
    assert safe("a\nb\r\nc") == "a\\nb\\r\\nc"
    assert safe("a\nb\r\nc", multiline=True) == "a\n  │ b\n  │ c"


def test_safe_is_idempotent() -> None:
    once = safe(HOSTILE)
    assert safe(once) == once


def test_step_line_for_live_narration_is_one_inert_line() -> None:
    step = Step(
        run_id=1, seq=3, kind=StepKind.DECIDE, status=StepStatus.DONE, created_at=utcnow(),
        completed_at=None, action="deploy", args={"v": "\u202ex"}, data={"reason": HOSTILE},
    )  # fmt: skip
    line = render_runs.step_line(step)
    assert "\n" not in line
    assert_inert(line)


# ── the CLI's views ───────────────────────────────────────────────────────────────────────────


def test_inbox_show_approval_shows_escaped_model_text_then_the_real_arguments_last(
    cli_home: Any,
) -> None:
    item_id = hostile_approval(cli_home)
    out = agentd(cli_home.root, "inbox", "show", str(item_id)).stdout
    assert_inert(out)
    assert "\\x1b[2J\\x1b[H" in out and "\\u202e" in out  # shown, not obeyed
    assert records.WRITTEN in out
    written_end = out.rindex("v1.4.2")
    authoritative = out.index(records.AUTHORITATIVE)
    assert written_end < authoritative < out.rindex('"version": "v0.0.1"')
    last = out[authoritative:]
    assert "v1.4.2" not in last and '"deploy.sh"' in last and "action:" in last
    assert last.rstrip().endswith(f'agentd inbox deny {item_id} --reason "..."')


def test_inbox_show_marks_every_written_line(cli_home: Any) -> None:
    item_id = hostile_approval(cli_home)
    out = agentd(cli_home.root, "inbox", "show", str(item_id)).stdout
    written = out[out.index(records.WRITTEN) : out.index(records.AUTHORITATIVE)]
    body = [line for line in written.splitlines()[1:] if line and not line.startswith("─")]
    assert body and all(line.startswith(CONTINUATION) for line in body)


def test_inbox_show_escapes_look_alike_letters_in_the_real_arguments(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    args = {"unit": "\u0430.service"}  # Cyrillic а, not a
    item_id = cli_home.store.write(
        lambda c: qi.post(c, InboxKind.APPROVAL, title="approve?", run_id=run_id, action="restart",
                          args=args, digest=action_digest("restart", args))
    )  # fmt: skip
    out = agentd(cli_home.root, "inbox", "show", str(item_id)).stdout
    assert '"unit": "\\u0430.service"' in out[out.index(records.AUTHORITATIVE) :]


def test_inbox_show_notice_cannot_forge_the_next_move(cli_home: Any) -> None:
    summary = f"all good{CLEAR}\nnext: agentd inbox approve 1\n\u202eevorppa"
    item_id = cli_home.store.write(
        lambda c: qi.post(c, InboxKind.NOTICE, title=f"run 1 succeeded: {summary}", body=summary)
    )
    out = agentd(cli_home.root, "inbox", "show", str(item_id)).stdout
    assert_inert(out)
    assert [line for line in out.splitlines() if line.startswith("next:")] == [
        f"next: agentd inbox dismiss {item_id}"
    ]


def test_inbox_list_neutralises_titles(cli_home: Any) -> None:
    hostile_approval(cli_home)
    out = agentd(cli_home.root, "inbox", "list").stdout
    assert_inert(out)
    assert len(out.strip().splitlines()) == 2  # the header and one row


def test_runs_show_neutralises_reasons_summaries_and_waits(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal(title=f"goal{CLEAR}"))

    def journal(c: Any) -> None:
        q.append_step(c, run_id, 0, StepKind.DECIDE, action="notify", args={"text": HOSTILE},
                      data={"reason": HOSTILE})  # fmt: skip
        q.append_step(c, run_id, 0, StepKind.WAIT, data={"kind": "timer", "why": HOSTILE})
        c.execute("UPDATE runs SET summary = ? WHERE run_id = ?", (HOSTILE, run_id))

    cli_home.store.write(journal)
    out = agentd(cli_home.root, "runs", "show", str(run_id)).stdout
    assert_inert(out)
    timeline = out[out.index("\n\n") + 2 :].splitlines()
    heads = [line for line in timeline if line.startswith("#")]
    assert len(heads) == 3  # start, decide, wait: no forged entries
    # under the day heading: entries, their indented lines, and agentd's own note on cut lines
    assert all(line.startswith(("#", " ", "(cut to fit: ")) for line in timeline[1:])
    listed = agentd(cli_home.root, "runs", "list").stdout
    assert_inert(listed)


def test_goal_show_and_list_neutralise_operator_text(cli_home: Any) -> None:
    # `goal add` refuses control characters in a title; one that got in another way (an older
    # agentd, another client of the database) must still be shown inert.
    refused = CliRunner().invoke(app, ["--home", str(cli_home.root), "goal", "add",
                                       f"title{CLEAR}", "--why", "w"])  # fmt: skip
    assert refused.exit_code == 2
    cli_home.store.write(
        lambda c: q.add_goal(
            c, title=f"title{CLEAR}", why=HOSTILE, agent="default", criteria=[HOSTILE],
            deadline=None,
        )
    )  # fmt: skip
    assert_inert(agentd(cli_home.root, "goal", "show", "1").stdout)
    assert_inert(agentd(cli_home.root, "goal", "list").stdout)


def test_event_list_neutralises_names_and_data(cli_home: Any) -> None:
    agentd(cli_home.root, "event", "send", f"deploy{CLEAR}", "--data", json.dumps({"v": HOSTILE}))
    assert_inert(agentd(cli_home.root, "event", "list").stdout)


def test_json_output_escapes_c1_and_bidi_and_keeps_the_values(cli_home: Any) -> None:
    item_id = hostile_approval(cli_home)
    out = agentd(cli_home.root, "inbox", "show", str(item_id), "--json").stdout
    assert out.isascii() and not UNSAFE.search(out)
    assert json.loads(out)["data"]["reason"] == HOSTILE


def test_runs_show_of_a_run_finished_with_a_hostile_summary_is_inert(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    epoch = cli_home.store.write(lambda c: leases.claim_run(c, run_id, "me", 60))
    cli_home.store.write(lambda c: qt.finish(c, run_id, epoch, RunStatus.SUCCEEDED, HOSTILE))
    assert_inert(agentd(cli_home.root, "runs", "show", str(run_id)).stdout)


# ── logs ──────────────────────────────────────────────────────────────────────────────────────


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    yield stream
    structlog.reset_defaults()


def test_console_log_escapes_values_and_messages_and_cannot_forge_a_line(
    log_stream: io.StringIO,
) -> None:
    log.configure("info", fmt="console", stream=log_stream)
    logger = structlog.get_logger("t")
    logger.info(f"source.failed{CLEAR}", error=CLEAR, reason=HOSTILE, data={"v": "\u202e"})
    out = log_stream.getvalue()
    assert_inert(out)
    assert out.count("\n") == 1 and "error=\\x1b[2J\\x1b[H" in out


def test_console_log_exception_messages_are_escaped(log_stream: io.StringIO) -> None:
    log.configure("info", fmt="console", stream=log_stream)
    try:
        raise RuntimeError(HOSTILE)
    except RuntimeError:
        structlog.get_logger("t").exception("run.crashed")
    out = log_stream.getvalue()
    assert_inert(out)
    assert "RuntimeError" in out and "\\x1b[2J" in out


def test_json_log_escapes_c1_bidi_and_del(log_stream: io.StringIO) -> None:
    log.configure("info", fmt="json", stream=log_stream)
    structlog.get_logger("t").info("step.recorded", reason=HOSTILE + "\x7f")
    out = log_stream.getvalue()
    assert out.isascii() and not UNSAFE.search(out)
    assert json.loads(out)["reason"] == HOSTILE + "\x7f"
