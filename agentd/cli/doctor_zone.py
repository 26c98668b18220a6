"""`agentd doctor` on a home whose check-ins keep the template's old time zone, UTC, on a machine
that lives in another: the quiet hours (22:00-08:00 by default) are then UTC's night, not the
operator's, and check-ins and notices land in it. Information, with the line to set."""

from __future__ import annotations

from agentd.cli.init_text import machine_zone
from agentd.config import Config
from agentd.views.records import Check


def check_zone(cfg: Config, here: str | None = None) -> list[Check]:
    here = machine_zone() if here is None else here
    utc = [
        name
        for name, agent in cfg.agents.items()
        if agent.checkin.enabled and agent.checkin.quiet is not None and agent.checkin.tz == "UTC"
    ]
    if here == "UTC" or not utc:
        return []
    quiet = cfg.agents[utc[0]].checkin.quiet
    said = (
        f"agent(s) {', '.join(utc)} keep quiet hours {quiet} in UTC while this machine is in "
        f'{here}: if that is your night, set tz = "{here}" under [agents.NAME.checkin]'
    )
    return [Check("time zone", False, said, required=False)]
