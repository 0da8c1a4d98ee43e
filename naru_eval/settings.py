"""Every ``NARU_*`` environment variable in one typed object, and one truthy-string parser.

``settings()`` is the accessor every module uses instead of ``os.environ``. It is read at use
time, never at import: the object is cached per snapshot of the process's ``NARU_*`` variables
(a tuple of their names and values, rebuilt on each call, a few microseconds), so a test's
``monkeypatch.setenv`` or a late ``os.environ[...] = ...`` is seen on the next call, and the
values are validated once per distinct environment. ``Settings.from_env(env)`` builds one from
any mapping (a test's dict, a subprocess's environment).

A value is refused with an error naming the variable; every bad value, and every ``NARU_*`` name
that is no variable (a misspelt ``NARU_RESPONSE_STOR`` would be silently ignored), is one line of
one :class:`SettingsError` (with the closest known name). An empty value means unset. Flags
(:func:`env_flag`, :func:`parse_flag`) take ``1/true/yes/on`` and ``0/false/no/off`` in any case;
anything else is an error, never a silent ``False``. The table in docs/settings.md is generated
from the field descriptions below (:func:`settings_table`; ``python -m naru_eval.settings``);
a test checks that the two agree.

This module imports nothing of ours: every layer may read it.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import sys
import typing
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Annotated, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, ValidationError
from pydantic.json_schema import JsonDict
from typing_extensions import TypedDict, Unpack

T = TypeVar("T")

PREFIX = "NARU_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_FLAG_HELP = f"must be one of {'/'.join(_TRUE)} or {'/'.join(_FALSE)} (any case)"


def parse_flag(value: object, name: str) -> bool:
    """``value`` (a bool, or any value read as its text) as a boolean: a bool, or one of
    ``1/true/yes/on`` / ``0/false/no/off`` (any case).
    Anything else raises a ValueError naming ``name`` (a variable or an adapter's model arg)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{name} {_FLAG_HELP}, got {value!r}")


def env_flag(name: str, default: bool = False, env: Mapping[str, str] | None = None) -> bool:
    """The flag variable ``name``; ``default`` when it is unset or empty."""
    raw = (os.environ if env is None else env).get(name)
    return default if raw is None or not raw.strip() else parse_flag(raw, name)


def _flag(value: object) -> bool:
    try:
        return parse_flag(value, "")
    except ValueError:
        raise ValueError(f"{_FLAG_HELP}, got {value!r}") from None


#: a boolean field read with :func:`parse_flag`
Flag = Annotated[bool, BeforeValidator(_flag)]


class Limits(TypedDict, total=False):
    """A number field's limits, as pydantic's ``Field`` takes them."""

    gt: float
    ge: float
    le: float
    allow_inf_nan: bool


def _var(default: T, text: str, default_doc: str | None = None, **limits: Unpack[Limits]) -> T:
    """A field: its default, its description (one line of the docs table) and, where the default
    is applied by the reader (None here), the default the docs state; ``limits`` are pydantic's.
    Typed as the value, as pydantic's ``Field`` is (the class reads it as the field's declaration)."""
    extra: JsonDict | None = {"default_doc": default_doc} if default_doc else None
    return Field(default, description=text, json_schema_extra=extra, **limits)


#: a count or a number of seconds that must be positive and finite (a NaN or a negative timeout
#: would wait forever or not at all)
_POSITIVE: Limits = {"gt": 0, "allow_inf_nan": False}
_NON_NEGATIVE: Limits = {"ge": 0, "allow_inf_nan": False}


class UserError(ValueError):
    """A mistake of the user's (a setting, a data file, a predictions file): its message says
    what is wrong and what to do, and is shown without a traceback (:func:`exit_on_user_error`)."""


class SettingsError(UserError):
    """Bad ``NARU_*`` variables: ``problems`` holds one line per bad value or unknown name."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            f"invalid NARU_* environment ({len(self.problems)} problem(s); docs/settings.md lists every variable):\n"
            + "\n".join(f"  - {p}" for p in self.problems)
        )


def _json_object(value: str | None) -> str | None:
    """NARU_HF_COLUMNS: a JSON object of dataset column -> NARU field (strings)."""
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at character {e.pos})") from None
    if not isinstance(parsed, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in parsed.items()):
        raise ValueError(
            f'must be a JSON object of dataset column -> NARU field, e.g. \'{{"qid": "question_id"}}\', '
            f"got a JSON {type(parsed).__name__}"
        )
    return value


#: a JSON-object setting, checked when read
JsonObject = Annotated[str | None, BeforeValidator(_json_object)]


class Settings(BaseModel):
    """The ``NARU_*`` variables; field ``x`` is variable ``NARU_X``. None: unset."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # -- data
    data_dir: str | None = _var(
        None, "the local NARU directory (annotations and videos; docs/data.md); wins over NARU_HF_DATASET"
    )
    hf_dataset: str | None = _var(None, "a Hugging Face dataset id to load instead of a local directory")
    hf_split: str = _var("test", "the split of NARU_HF_DATASET")
    hf_columns: JsonObject = _var(None, "JSON object: dataset column -> NARU field, merged over the built-in map")
    video_dir: str | None = _var(
        None,
        "the folder the videos are in (`<video_id>.<ext>`): those of NARU_HF_DATASET, or a local data set's "
        "kept elsewhere; `video_path` is relative to it for NARU_HF_DATASET (docs/data.md)",
        "NARU_DATA_DIR/videos",
    )
    skip_video_check: Flag = _var(False, "flag: the lmms-eval tasks' preflight checks the schema only")
    allow_external_videos: Flag = _var(
        False,
        "flag: let annotations name videos outside the data folder (ids with `/`, absolute or `..` "
        "`video_path`, symlinks leading out); only for data you trust (docs/data.md)",
    )
    # -- stores and caches
    cache_dir: str | None = _var(
        None, "the stores' directory (responses, judge cache, upload registry)", "~/.cache/naru-eval"
    )
    response_store: str | None = _var(
        None,
        "the write-through response store (SQLite file; `{rank}` in it: one per accelerate rank, docs/cluster.md)",
        "NARU_CACHE_DIR/responses.sqlite",
    )
    frame_cache: str | None = _var(None, "directory of the on-disk frame cache and frame indexes", "in memory only")
    transcript_cache: str | None = _var(
        None,
        "directory of the ASR transcripts `naru-eval transcribe` writes (and their checkpoints)",
        "NARU_CACHE_DIR/transcripts",
    )
    select_cache: str | None = _var(
        None,
        "directory of the candidate pools' frame embeddings (`select=`: one per video, encoder and pool rate)",
        "NARU_CACHE_DIR/pools",
    )
    # -- API runs
    config_error_after: int | None = _var(
        None,
        "stop a run when its first N answered requests all fail with one client error (0: never)",
        "3",
    )
    gemini_prices: str | None = _var(None, "a Gemini price file over the built-in table (docs/gemini.md)")
    gemini_upload_registry: str | None = _var(
        None, "the Gemini upload registry (SQLite file)", "beside the response store, else in NARU_CACHE_DIR"
    )
    # -- MCQ extraction
    mcq_llm_fallback: Flag = _var(
        False, "flag: ask the judge model for the letter of an unparseable MCQ answer (docs/judge.md)"
    )
    mcq_llm_fallback_kinds: str | None = _var(
        None, "comma-separated extraction failures the fallback handles", "no_letter,ambiguous"
    )
    # -- the judge (naru_eval.judge.config.JudgeConfig.from_env reads these)
    judge_backend: str | None = _var(
        None, "`openai`, `offline` (MiniLM if installed, else lexical), `offline-minilm`, `offline-lexical`", "openai"
    )
    judge_model: str | None = _var(None, "the judge model", "gpt-5.5")
    judge_facts_model: str | None = _var(None, "the model whose frozen facts are used", "the judge model")
    judge_base_url: str | None = _var(None, "an OpenAI-compatible `/v1` URL", "OPENAI_BASE_URL, else the OpenAI API")
    judge_api_key: SecretStr | None = _var(None, "the judge's key; never logged or cached", "OPENAI_API_KEY")
    judge_temperature: float | None = _var(
        None, "sent only to models that take one (never to gpt-5 / o-series)", "0", ge=0, le=2, allow_inf_nan=False
    )
    judge_reasoning_effort: str | None = _var(
        None, "a reasoning effort the model takes", "medium (high for -pro) for gpt-5 / o-series"
    )
    judge_max_tokens: int | None = _var(None, "`max_completion_tokens` per judge call", "8192", ge=1)
    judge_seed: int | None = _var(None, "an optional `seed` (best effort on the server)")
    judge_concurrency: int | None = _var(None, "judge requests in flight per process", "16", ge=1)
    judge_max_retries: int | None = _var(None, "transport retries (429, 5xx, timeouts)", "5", ge=0)
    judge_retry_base_delay: float | None = _var(None, "first retry delay, seconds", "1", **_NON_NEGATIVE)
    judge_retry_max_delay: float | None = _var(None, "longest retry delay, seconds", "60", **_NON_NEGATIVE)
    judge_parse_attempts: int | None = _var(None, "attempts for an unparseable or mismatched judge output", "3", ge=1)
    judge_timeout: float | None = _var(None, "seconds per judge request", "180", **_POSITIVE)
    judge_cache: str | None = _var(None, "the judge's SQLite cache", "NARU_CACHE_DIR/judge.sqlite")
    judge_prices: str | None = _var(
        None, "JSON or a JSON file: judge prices (USD per 1M tokens) over the built-in table"
    )
    judge_batch: Flag = _var(
        False, "flag: `naru-eval judge score` sends the verification calls as OpenAI Batch API jobs (half price)"
    )
    judge_prefetch: Flag = _var(True, "flag: decompose the run's questions in one batch before judging (0: one by one)")
    # -- shell only
    eval_repo: str | None = _var(
        None,
        "the naru-eval checkout: scripts/frame_sweep.slurm runs from it, an experiment manifest records its revision",
        "the sbatch directory",
    )

    def judge_key(self) -> str | None:
        """NARU_JUDGE_API_KEY's value (a SecretStr elsewhere, so no repr or log shows it)."""
        return self.judge_api_key.get_secret_value() if self.judge_api_key is not None else None

    @classmethod
    def variable(cls, field: str) -> str:
        """The environment variable of ``field``."""
        return PREFIX + field.upper()

    @classmethod
    def variables(cls) -> list[str]:
        """Every ``NARU_*`` variable, in the order of the fields."""
        return [cls.variable(f) for f in cls.model_fields]

    @classmethod
    def unknown_problems(cls, env: Mapping[str, str]) -> list[str]:
        """One line per ``NARU_*`` name in ``env`` that is no variable, with the closest known one."""
        known = cls.variables()
        out = []
        for name in sorted(k for k in env if k.startswith(PREFIX) and k not in known):
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else "see docs/settings.md for the variables"
            out.append(f"{name}: unknown variable ({hint}); it would be ignored: fix its name or unset it")
        return out

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings of ``env`` (default: the process's); one :class:`SettingsError` lists every
        bad value and every unknown ``NARU_*`` name."""
        env = os.environ if env is None else env
        raw = {f: env.get(cls.variable(f)) for f in cls.model_fields}
        data = {f: v.strip() for f, v in raw.items() if v is not None and v.strip()}
        problems = []
        out: Settings | None = None
        try:
            out = cls.model_validate(data)
        except ValidationError as e:
            for err in e.errors():
                field = str(err["loc"][0])
                shown = "<hidden>" if "key" in field else _shown(data.get(field))
                msg = str(err["msg"]).removeprefix("Value error, ")
                problems.append(f"{cls.variable(field)}={shown}: {msg}")
        problems += cls.unknown_problems(env)
        if problems or out is None:
            raise SettingsError(problems)
        return out


def _shown(value: object) -> str:
    """A value in a message: its repr, cut to 80 characters (a setting may hold a whole JSON file)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@functools.lru_cache(maxsize=8)
def _cached(snapshot: tuple[tuple[str, str], ...]) -> Settings:
    return Settings.from_env(dict(snapshot))


def snapshot(env: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """The ``NARU_*`` variables of ``env`` (default: the process's), as sorted (name, value) pairs:
    a hashable key of the configuration (what :func:`settings` is cached on, and a per-process
    singleton such as the judge's, ``naru_eval.judge.config.env_fingerprint``)."""
    env = os.environ if env is None else env
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(PREFIX)))


#: the OpenAI SDK's own variable for its endpoint: the judge's when ``NARU_JUDGE_BASE_URL`` is unset
OPENAI_BASE_URL = "OPENAI_BASE_URL"


def openai_base_url(env: Mapping[str, str] | None = None) -> str | None:
    """``OPENAI_BASE_URL`` of ``env`` (default: the process's), as it is set (None: unset)."""
    return (os.environ if env is None else env).get(OPENAI_BASE_URL)


def settings() -> Settings:
    """The process's settings now (cached per distinct ``NARU_*`` environment)."""
    return _cached(snapshot())


def check_environment() -> None:
    """Raise the :class:`SettingsError` of the process's ``NARU_*`` environment, if any: what every
    ``naru-eval`` command, the lmms-eval tasks and the adapters run first."""
    settings()


@contextmanager
def exit_on_user_error(who: str) -> Iterator[None]:
    """A :class:`UserError` inside becomes its message on stderr and exit status 2, never a
    traceback: for code that lmms-eval calls (its model constructor, the tasks' ``process_docs``),
    which would print a traceback, retry five times and wrap the message in ``RetryError[...]``
    (and then exit 0). ``SystemExit`` is not an ``Exception``, so lmms-eval lets it through."""
    try:
        yield
    except UserError as e:
        print(f"{who}: {e}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def _kind(annotation: object) -> str:
    """The docs' type of a field: flag, integer, number, secret or text."""
    types = set(typing.get_args(annotation)) - {type(None)} or {annotation}
    for t, name in ((bool, "flag"), (int, "integer"), (float, "number"), (SecretStr, "secret")):
        if t in types:
            return name
    return "text"


def settings_table() -> str:
    """The Markdown table of every variable (docs/settings.md), from the field descriptions."""
    rows = ["| Variable | Type | Default | Meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if extra.get("default_doc"):
            default = str(extra["default_doc"])
        elif field.default is None:
            default = "unset"
        else:
            default = str(field.default).lower() if isinstance(field.default, bool) else str(field.default)
        kind = _kind(field.annotation)
        rows.append(f"| `{Settings.variable(name)}` | {kind} | {default} | {field.description} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(settings_table(), end="")
