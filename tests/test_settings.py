"""naru_eval.settings: every NARU_* variable in one typed object, read at use time, one flag parser;
model_adapters.args: typed adapter args (unknown args refused, listing the valid ones)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from naru_eval.settings import Settings, env_flag, parse_flag, settings, settings_table

ROOT = Path(__file__).resolve().parents[1]
#: NARU_* strings in the source that are not variables
NOT_VARIABLES = {"NARU_REQUEST_FAILED", "NARU_JUDGE_"}


def _sources() -> list[Path]:
    files = [*ROOT.joinpath("naru_eval").rglob("*.py"), *ROOT.joinpath("model_adapters").rglob("*.py")]
    files += [ROOT / "tasks" / "naru" / "utils.py", *ROOT.joinpath("scripts").glob("*")]
    return [p for p in files if p.is_file()]


def test_the_docs_table_is_generated_from_the_fields():
    doc = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    begin, end = "<!-- settings table: begin -->\n", "<!-- settings table: end -->"
    assert begin in doc and end in doc
    assert doc.split(begin, 1)[1].split(end, 1)[0] == settings_table()


def test_every_variable_the_code_names_is_a_field_and_none_is_read_elsewhere():
    fields = {Settings.variable(f) for f in Settings.model_fields}
    named: dict[str, Path] = {}
    direct = []
    for path in _sources():
        if path == ROOT / "naru_eval" / "settings.py":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for name in re.findall(r"\bNARU_[A-Z0-9_]+", text):
            named.setdefault(name, path)
        if path.suffix == ".py":
            direct += [
                f"{path.relative_to(ROOT)}: {m}" for m in re.findall(r"(?:environ|getenv)\W+[\"']NARU_\w+", text)
            ]
    unknown = {n: str(p.relative_to(ROOT)) for n, p in named.items() if n not in fields | NOT_VARIABLES}
    assert not unknown, f"NARU_* names that are no Settings field: {unknown}"
    assert not direct, f"read through naru_eval.settings instead: {direct}"


@pytest.mark.parametrize("text", ["1", "true", "TRUE", " Yes ", "on", "On"])
def test_flags_true(text):
    assert parse_flag(text, "X") is True and env_flag("NARU_X", False, {"NARU_X": text}) is True


@pytest.mark.parametrize("text", ["0", "false", "False", "NO", "off"])
def test_flags_false(text):
    assert parse_flag(text, "X") is False and env_flag("NARU_X", True, {"NARU_X": text}) is False


def test_a_flag_is_never_guessed():
    with pytest.raises(ValueError, match="NARU_X must be one of 1/true/yes/on or 0/false/no/off"):
        env_flag("NARU_X", False, {"NARU_X": "enabled"})
    assert env_flag("NARU_X", True, {}) is True and env_flag("NARU_X", True, {"NARU_X": " "}) is True


def test_settings_are_read_at_use_time(monkeypatch, tmp_path):
    monkeypatch.delenv("NARU_FRAME_CACHE", raising=False)
    assert settings().frame_cache is None
    monkeypatch.setenv("NARU_FRAME_CACHE", str(tmp_path))
    assert settings().frame_cache == str(tmp_path)
    monkeypatch.setenv("NARU_JUDGE_PREFETCH", "OFF")
    from naru_eval.lmms.open_task import prefetch_enabled

    assert prefetch_enabled() is False
    monkeypatch.setenv("NARU_JUDGE_PREFETCH", "yes")
    assert prefetch_enabled() is True


def test_one_error_names_every_bad_variable_and_hides_the_key():
    env = {"NARU_JUDGE_SEED": "x", "NARU_SKIP_VIDEO_CHECK": "maybe", "NARU_JUDGE_API_KEY": "sk-secret-123456"}
    with pytest.raises(ValueError) as e:
        Settings.from_env(env)
    msg = str(e.value)
    assert "NARU_JUDGE_SEED='x'" in msg and "NARU_SKIP_VIDEO_CHECK='maybe'" in msg
    s = Settings.from_env({"NARU_JUDGE_API_KEY": "sk-secret-123456", "NARU_HF_SPLIT": ""})
    assert "sk-secret" not in repr(s) and s.judge_key() == "sk-secret-123456"
    assert s.hf_split == "test"  # empty means unset


def test_skip_video_check_takes_every_truthy_spelling(monkeypatch):
    """The preflight used to honour only 1/true: ``yes`` validated every video anyway."""
    from naru_eval.lmms import tasks

    seen = []
    monkeypatch.setattr(tasks, "validate", lambda videos: seen.append(videos))
    tasks._preflight.cache_clear()
    monkeypatch.setenv("NARU_SKIP_VIDEO_CHECK", "Yes")
    tasks._preflight(("k",))
    assert seen == [False]
    tasks._preflight.cache_clear()


def test_mcq_fallback_flag_refuses_garbage(monkeypatch):
    """``NARU_MCQ_LLM_FALLBACK=enable`` used to turn the fallback silently off."""
    from naru_eval.lmms.tasks import mcq_fallback

    monkeypatch.setenv("NARU_MCQ_LLM_FALLBACK", "0")
    assert mcq_fallback() is None
    monkeypatch.setenv("NARU_MCQ_LLM_FALLBACK", "enable")
    with pytest.raises(ValueError, match="NARU_MCQ_LLM_FALLBACK"):
        mcq_fallback()


def test_config_error_after(monkeypatch):
    from naru_eval.api.retry import DEFAULT_CONFIG_ERROR_AFTER, config_error_after_from_env

    monkeypatch.delenv("NARU_CONFIG_ERROR_AFTER", raising=False)
    assert config_error_after_from_env() == DEFAULT_CONFIG_ERROR_AFTER
    monkeypatch.setenv("NARU_CONFIG_ERROR_AFTER", "-2")
    assert config_error_after_from_env() == 0
    monkeypatch.setenv("NARU_CONFIG_ERROR_AFTER", "three")
    with pytest.raises(ValueError, match="NARU_CONFIG_ERROR_AFTER"):
        config_error_after_from_env()


def test_judge_config_reads_through_settings():
    from naru_eval.judge.config import JudgeConfig

    cfg = JudgeConfig.from_env(
        {"NARU_JUDGE_TIMEOUT": "30", "NARU_JUDGE_MODEL": "gpt-4.1", "OPENAI_BASE_URL": "http://h/v1/"}
    )
    assert (cfg.timeout, cfg.model, cfg.base_url, cfg.concurrency) == (30.0, "gpt-4.1", "http://h/v1", 16)
    with pytest.raises(ValueError, match="NARU_JUDGE_TIMEOUT"):
        JudgeConfig.from_env({"NARU_JUDGE_TIMEOUT": "soon"})


# --------------------------------------------------------------------------- adapter args


def test_parse_model_args_types_defaults_and_unknown_args():
    from naru_eval.adapters.args import HFArgs, parse_model_args

    a = parse_model_args(HFArgs, {"pretrained": "a/b", "num_frames": "8", "trust_remote_code": "YES", "dtype": "none"})
    assert (a.num_frames, a.trust_remote_code, a.dtype, a.fps) == (8, True, "auto", None)
    with pytest.raises(ValueError) as e:
        parse_model_args(HFArgs, {"pretrained": "a", "num_frame": "8", "max_new_tokens": "x"}, "naru_x")
    msg = str(e.value)
    assert msg.startswith("naru_x: unknown model_args ['num_frame']; valid: ") and "num_frames" in msg
    assert "max_new_tokens='x'" in msg
    with pytest.raises(ValueError, match="store='maybe': must be true or false"):
        parse_model_args(HFArgs, {"pretrained": "a", "store": "maybe"})


def test_an_hf_family_refuses_an_unknown_arg_listing_its_own_too():
    """A typo (``num_frame``) used to vanish into the run key while the default sampling ran."""
    from model_adapters.qwen2_5_vl import Qwen2_5_VL

    with pytest.raises(ValueError) as e:
        Qwen2_5_VL(pretrained="Qwen/Qwen2.5-VL-7B-Instruct", num_frame="8")
    msg = str(e.value)
    assert msg.startswith("naru_qwen2_5_vl: unknown model_args ['num_frame']")
    assert "min_frames" in msg and "num_frames" in msg and "pretrained" in msg


def test_replay_args(tmp_path):
    from model_adapters.replay import NaruReplay

    preds = tmp_path / "p.jsonl"
    preds.write_text('{"question_id": "q1", "response": "A"}\n', encoding="utf-8")
    model = NaruReplay(predictions=str(preds), pretrained="model-a", num_frames="8", batch_size=1, device="cpu")
    assert model.predictions == {"q1": "A"} and model.num_frames == 8 and model.args.pretrained == "model-a"
    with pytest.raises(ValueError, match=r"naru_replay: unknown model_args \['api_key'\]; valid: .*predictions"):
        NaruReplay(predictions=str(preds), api_key="TOPSECRET")


def test_a_family_flag_is_parsed_the_same_way():
    """``enable_thinking=maybe`` used to mean false."""
    from model_adapters.qwen3_5 import Qwen3_5

    with pytest.raises(ValueError, match="must be one of 1/true/yes/on"):
        Qwen3_5(pretrained="Qwen/Qwen3.5-9B", enable_thinking="maybe")


def test_unknown_names_are_reported_with_the_closest_variable():
    """A misspelt NARU_RESPONSE_STOR was silently ignored (the default store was used)."""
    from naru_eval.settings import SettingsError

    with pytest.raises(SettingsError) as err:
        Settings.from_env({"NARU_RESPONSE_STOR": "/x.sqlite", "NARU_JUDGE_BASE_UR": "http://h/v1", "NARU_ZZZ": "1"})
    problems = err.value.problems
    assert "NARU_RESPONSE_STOR: unknown variable (did you mean NARU_RESPONSE_STORE?)" in problems[1]
    assert "did you mean NARU_JUDGE_BASE_URL?" in problems[0]
    assert "NARU_ZZZ: unknown variable (see docs/settings.md" in problems[2]


@pytest.mark.parametrize(
    "argv",
    [
        ["validate-data", "."],
        ["score", "x.jsonl"],
        ["verify-run", "."],
        ["leaderboard", "--no-plots", "-o", "lb.json"],
        ["judge", "score", "."],
        ["store", "check", "x.sqlite"],
        ["tasks-path"],
        ["estimate-cost", "--model", "gemini-2.5-flash"],
    ],
)
def test_every_command_names_every_bad_setting_without_a_traceback(argv, monkeypatch, capsys, tmp_path):
    """``NARU_SKIP_VIDEO_CHECK=maybe`` and ``NARU_CONFIG_ERROR_AFTER=abc`` wrapped a good message
    in a traceback from every command; now one message lists each bad value, before any work."""
    from naru_eval.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NARU_SKIP_VIDEO_CHECK", "maybe")
    monkeypatch.setenv("NARU_CONFIG_ERROR_AFTER", "abc")
    monkeypatch.setenv("NARU_RESPONSE_STOR", "x")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "invalid NARU_* environment (3 problem(s)" in err
    assert "NARU_SKIP_VIDEO_CHECK='maybe'" in err and "NARU_CONFIG_ERROR_AFTER='abc'" in err
    assert "did you mean NARU_RESPONSE_STORE?" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing was written


def test_the_settings_table_states_the_limits():
    """A negative timeout, a zero max tokens and a NaN temperature are refused where they are read."""
    for name, value in (
        ("NARU_JUDGE_TIMEOUT", "0"),
        ("NARU_JUDGE_MAX_TOKENS", "-1"),
        ("NARU_JUDGE_TEMPERATURE", "inf"),
    ):
        with pytest.raises(ValueError, match=name):
            Settings.from_env({name: value})
    assert Settings.from_env({"NARU_JUDGE_TIMEOUT": "0.5"}).judge_timeout == 0.5
