"""`agentd doctor --ping` against a loopback server that answers as llama-cpp-python does (HTTP
500 naming `response_format.type` for json_schema, a completion for json_object): the ping probes
past the refusal and names the structured-output mode the server accepted."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from agentd import config
from agentd.cli import doctor
from tests.conftest import ServeHttp

RECORDED = Path(__file__).parent.parent / "fixtures" / "llama_cpp_python"


class LlamaCppPython(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if sent.get("response_format", {}).get("type") == "json_schema":
            status, body = (
                500,
                json.loads((RECORDED / "error_500_response_format.json").read_text()),
            )
        else:
            status = 200
            body = json.loads((RECORDED / "chat_completion_raw_newline.json").read_text())
            body["choices"][0]["message"]["content"] = '{"summary": "pong"}'
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def test_ping_names_the_structured_output_the_server_accepted(
    http_server: ServeHttp, tmp_path: Path
) -> None:
    url = http_server(LlamaCppPython)
    text = (
        f'[models.default]\nprovider = "openai"\nmodel = "smollm2"\nbase_url = "{url}/v1"\n'
        'timeout_s = 30\n\n[agents.default]\nactions = ["finish"]\n'
    )
    cfg = config.parse(text, tmp_path / "config.toml")
    (check,) = await doctor.ping(cfg)
    assert check.ok, check.message
    assert "structured output: json_object" in check.message
