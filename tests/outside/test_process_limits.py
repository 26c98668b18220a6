"""The daemon raises its own soft open-file limit (agentd/api/openfiles.py); the commands it runs
start with the limit the daemon was given, as they would under systemd without agentd."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_children_start_with_the_daemons_original_soft_file_limit() -> None:
    # A fresh interpreter: the test must not change pytest's own limits.
    script = textwrap.dedent(
        """
        import asyncio, os, resource
        from agentd.api import openfiles
        from agentd.outside import process

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        raised = openfiles.raise_limit()
        done = asyncio.run(process.run_argv(
            ["sh", "-c", "ulimit -n"], env=dict(os.environ), cwd=None, timeout_s=30,
            output_bytes=1000,
        ))
        print(raised, resource.getrlimit(resource.RLIMIT_NOFILE)[0], done.stdout.strip(), hard)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    raised, own, child, hard = out.stdout.split()
    assert hard != "256", "the hard limit is already 256: nothing to raise on this machine"
    assert raised == own == hard  # the daemon took the hard limit
    assert child == "256"  # its command got the limit the daemon started with
