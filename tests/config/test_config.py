"""Config files: the example loads, mistakes name the file, line and key, and secrets stay named."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd import config
from agentd.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_config_example_loads_and_documents_every_section() -> None:
    cfg = config.load(ROOT / "config.example.toml")
    assert {"default"} == set(cfg.agents)
    assert {"http", "command", "file_tail"} == {s.type for s in cfg.sources.values()}
    assert (ROOT / "config.example.toml").read_text() == (
        ROOT / "agentd/config.example.toml"
    ).read_text()


def test_config_unknown_key_names_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[models.default]\nprovider = "scripted"\nreplies = "r.json"\ncolour = "blue"\n'
    )
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert str(path) in str(e.value)
    assert "line 4" in str(e.value) and "models.default.colour" in str(e.value)
    assert "unknown key" in str(e.value)


def test_config_bad_value_in_nested_table_points_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[models.default]\nprovider = "scripted"\nreplies = "r.json"\n\n'
        '[agents.a]\nactions = ["finish"]\n\n[agents.a.limits]\nmax_steps = -1\n'
    )
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert "line 9" in str(e.value) and "agents.a.limits.max_steps" in str(e.value)


@pytest.mark.parametrize(
    ("text", "where", "fix"),
    [
        ('[daemon]\nlog_level = "info"\n\n[notify.pager]\ntype = "slack"\n', "line 5, notify.pager.type",
         "unknown type 'slack'; use one of 'webhook', 'ntfy', 'email'"),
        ('[models.m]\nprovider = "gpt"\n', "line 2, models.m.provider",
         "unknown provider 'gpt'; use one of 'scripted'"),
    ],
)  # fmt: skip
def test_config_unknown_type_names_the_key_its_line_and_the_choices(
    tmp_path: Path, text: str, where: str, fix: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert where in str(e.value) and fix in str(e.value)


def test_config_invalid_toml_reports_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[daemon]\nmax_concurrent_runs = \n")
    with pytest.raises(ConfigError, match=r"line 2"):
        config.load(path)


def test_config_unknown_references_are_named(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[models.default]\nprovider = "scripted"\nreplies = "r.json"\n'
        '[agents.a]\nactions = ["reboot"]\n'
    )
    with pytest.raises(ConfigError, match=r"unknown action 'reboot'"):
        config.load(path)


def test_config_missing_file_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"agentd --home \S+ init"):
        config.load(tmp_path / "nope.toml")


def test_config_base_env_carries_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-should-not-leak")
    assert "ANTHROPIC_API_KEY" not in config.base_env()
    assert "sk-test-should-not-leak" not in str(config.base_env())


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize(
    "pasted",
    [
        "sk-ant-api03-Zx8vQ2mN4pL7rT1yU6wE9oI3aS5dF0gH",
        "sk-proj-abcdefghijklmnop",
        "Zx8vQ2mN4pL7rT1yU6wE9oI3aS5dF0gHjK",  # no dash, but a key all the same
        "my key",
    ],
)
def test_config_api_key_env_must_be_a_variable_name_and_is_never_echoed(
    tmp_path: Path, provider: str, pasted: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[models.m]\nprovider = "{provider}"\nmodel = "x"\napi_key_env = "{pasted}"\n')
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert pasted not in str(e.value)
    assert "line 4" in str(e.value) and "NAME of an environment variable" in str(e.value)


@pytest.mark.parametrize("name", ["ANTHROPIC_API_KEY", "_key", "OPENAI_API_KEY_2", "a" * 40])
def test_config_api_key_env_accepts_variable_names(tmp_path: Path, name: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[models.m]\nprovider = "anthropic"\nmodel = "x"\napi_key_env = "{name}"\n')
    assert config.load(path).models["m"].api_key_env == name


@pytest.mark.parametrize("pasted", ["AKIAIOSFODNN7EXAMPLE12", "ghp_" + "a1" * 18, "xoxb-1234-abcd"])
def test_config_api_key_env_refuses_keys_that_look_like_names(tmp_path: Path, pasted: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[models.m]\nprovider = "anthropic"\nmodel = "x"\napi_key_env = "{pasted}"\n')
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert "NAME of an environment variable" in str(e.value) and pasted not in str(e.value)
