"""The notification settings' durations (remind_after, escalate_after, a channel's *_s) take what
agentd writes — 90, "90", "90s", "45m", "1d12h" — and refuse lax forms float() would take:
non-ASCII digits, exponents, underscores, infinities, with the config's own message."""

from __future__ import annotations

import pytest

from agentd.config.notify import duration_s


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(90, 90.0), (1.5, 1.5), ("90", 90.0), (" 90 ", 90.0), ("90s", 90.0), ("45m", 2700.0),
     ("4h", 14400.0), ("1d12h", 129600.0), ("2w", 1209600.0), ("1.5h", 5400.0)],
)  # fmt: skip
def test_durations_agentd_writes_are_read(value: object, seconds: float) -> None:
    assert duration_s(value) == seconds


@pytest.mark.parametrize(
    "value", ["٣h", "３h", "1٣m", "٣", "１２", "1e3", "1_000", "inf", "nan", "-5", "0", "5x", "",
              True, float("nan"), float("inf")],
)  # fmt: skip
def test_lax_durations_are_refused_with_the_configs_message(value: object) -> None:
    with pytest.raises(ValueError, match=r"duration .* (is not valid: write e\.g\. 90s|must be)"):
        duration_s(value)
