"""What a hook's counts keep is bounded (review of issue 29): a refusal's reason may quote what a
stranger sent (a declared Content-Length, …), so a stranger varying it made one entry per
request in the daemon's memory and in `/api/hooks`; past 50 kinds they are counted by status."""

from __future__ import annotations

from agentd.hooks.stats import Stats


def test_hooks_refusal_reasons_kept_are_bounded() -> None:
    stats = Stats()
    for n in range(10_000):
        stats.refused("sw", 413, f"the body is {2_000_000 + n:,} bytes; at most 1,048,576 fit")
    shown = stats.as_json()["sw"]
    assert shown["refused"] == 10_000
    assert len(shown["refused_by"]) <= 51
    assert shown["refused_by"]["413 (other reasons)"] == 10_000 - 50
    assert len(stats.take_pending("sw")["refused_by"]) <= 51


async def test_hooks_counts_not_written_at_stop_do_not_fail_the_stop() -> None:
    from agentd.errors import StateError
    from agentd.hooks.receiver import Receiver

    async def closed(work: object) -> int:
        raise StateError("the store is closed; not writing")

    receiver = Receiver(lambda: None, closed, lambda: None)  # type: ignore[arg-type,return-value]
    receiver.stats.refused("sw", 401, "no webhook-id")
    await receiver.flush()  # logged, not raised
