from pathlib import Path

import pytest

from glmcot.eval.config import ConfigError, load_config


def test_precedence_options_over_env_over_file(tmp_path: Path):
    config_file = tmp_path / "glmcot.toml"
    config_file.write_text('[eval]\nconcurrency = 3\nprice_input = 1.5\nllm_model = "file-model"\n'
                           'llm = "http://file"\n')
    env = {"GLMCOT_CONCURRENCY": "5", "GLMCOT_LLM_MODEL": "env-model"}
    config = load_config({"concurrency": 7}, config_file, environ=env)
    assert config.concurrency == 7            # option wins
    assert config.llm_model == "env-model"    # env beats file
    assert config.price_input == 1.5          # file beats default
    assert config.llm == "http://file"
    assert config.max_steps == 10             # default


def test_config_file_from_env_and_cache_dir(tmp_path: Path):
    config_file = tmp_path / "c.toml"
    config_file.write_text('max_steps = 4\n')
    config = load_config({}, None, environ={"GLMCOT_CONFIG": str(config_file), "GLMCOT_CACHE": str(tmp_path / "cache")})
    assert config.max_steps == 4
    assert config.cache_dir == tmp_path / "cache"


def test_bad_values_are_clear_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match="GLMCOT_CONCURRENCY: concurrency must be an integer"):
        load_config({}, None, environ={"GLMCOT_CONCURRENCY": "many"})
    bad = tmp_path / "bad.toml"
    bad.write_text("concurency = 3\n")
    with pytest.raises(ConfigError, match="unknown setting.*concurency"):
        load_config({}, bad, environ={})
    broken = tmp_path / "broken.toml"
    broken.write_text("= = =\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config({}, broken, environ={})
    with pytest.raises(ConfigError, match="not found"):
        load_config({}, tmp_path / "absent.toml", environ={})
    with pytest.raises(ConfigError, match="concurrency must be at least 1"):
        load_config({"concurrency": 0}, None, environ={})


def test_api_key_is_masked_in_dumps():
    config = load_config({}, None, environ={"OPENAI_API_KEY": "sk-secret"})
    assert config.llm_api_key == "sk-secret"
    assert config.to_dict()["llm_api_key"] == "***"


def test_llm_timeout_and_retries_come_from_options_env_or_file(tmp_path: Path, table_server):
    from glmcot.eval.config import ConfigError
    from glmcot.eval.systems import open_system

    assert (load_config({}, environ={}).llm_timeout, load_config({}, environ={}).llm_retries) == (120.0, 4)
    env = {"GLMCOT_LLM_TIMEOUT": "9.5", "GLMCOT_LLM_RETRIES": "1"}
    config = load_config({}, environ=env)
    assert (config.llm_timeout, config.llm_retries) == (9.5, 1)
    config = load_config({"llm_timeout": 3, "llm_retries": 0, "llm": table_server[0], "llm_model": "table-model"},
                         environ=env)
    with open_system(config) as system:
        assert (system.backend.timeout_s, system.backend.max_retries) == (3.0, 0)
    toml = tmp_path / "c.toml"
    toml.write_text("[eval]\nllm_timeout = 30\nllm_retries = 2\n")
    from_file = load_config({}, toml, environ={})
    assert (from_file.llm_timeout, from_file.llm_retries) == (30.0, 2)
    with pytest.raises(ConfigError, match="llm_retries"):
        load_config({"llm_retries": -1}, environ={})
    with pytest.raises(ConfigError, match="GLMCOT_LLM_TIMEOUT"):
        load_config({}, environ={"GLMCOT_LLM_TIMEOUT": "soon"})


def test_scripted_with_a_vllm_glmcot_server_is_force_decoded_there():
    from glmcot.eval import systems
    from glmcot.eval.commands import _backend_choice
    from glmcot.eval.config import EvalConfig

    url = "vllm+glmcot:http://127.0.0.1:8000/v1"
    assert _backend_choice(None, url, True, "tiny") == "scripted"
    config = EvalConfig(llm=url, llm_model="tiny")
    spec = systems.backend_spec(config, scripted=True)
    assert str(spec) == "scripted+" + url and spec.options.model == "tiny"
    assert "force-decoded" in systems.describe_backend(config, scripted=True)
    assert str(systems.backend_spec(EvalConfig(), scripted=True)).startswith("scripted+native:")
