"""The metrics, declared once: one :class:`MetricTable` per task kind.

A metric is a row of its task's table: its name, its scope (which questions count towards it),
the value one question contributes, how the values are aggregated, whether higher is better, and
whether the leaderboard shows it as a column. Everything else reads the table: the
``process_results`` payloads (:meth:`MetricTable.payloads`), the recomputation from a sample
log (:meth:`MetricTable.compute`), the video-clustered bootstrap (``naru_eval.report.stats``),
the leaderboard's columns and decimals (``naru_eval.report.render``), the task YAMLs'
``metric_list`` (generated: ``naru-eval metric-table --write tasks/naru``) and the metric table
of docs/metrics.md (``naru-eval metric-table --write docs/metrics.md``).

The tables: ``MCQ`` (``naru_eval.core.scoring``: the MCQ tasks and their blind variants),
``CIRCULAR`` (``naru_eval.core.variants``) and ``OPEN`` (``naru_eval.judge.score``).

Aggregations (what lmms-eval's aggregation hook computes from the payloads):

* ``mean``: the mean of ``score`` over the payloads that carry it (the questions in scope);
* ``macro``: the authors' mean of category means (:func:`aggregate_macro`); the payload carries
  the question's value under :data:`MACRO_KEY`, never ``score``, so lmms-eval's per-item
  standard errors read N/A for it instead of the standard error of a micro mean;
* ``group``: a property of a group of records, not of one (``circular``: a question right in
  all four rotations), computed by the table's ``group`` function; no payload carries a value;
* ``sum`` (``cost``: a sum that also logs the judge's usage): the sum of ``score``, unknown when
  one payload's value is unknown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Generic, Literal, Protocol, TypeVar

from typing_extensions import Never

from naru_eval.core.data import CATEGORIES, CULTURAL, NARRATIVE
from naru_eval.core.json_types import JSONMapping, JSONObject, number

#: one metric's ``process_results`` payload: a JSON object lmms-eval logs on the sample-log line
#: (the question's record, plus the metric's value under ``score`` or :data:`MACRO_KEY`)
Payload = JSONObject
#: where a macro metric's payload carries its question's value (never ``score``: see the module doc)
MACRO_KEY: Final = "item_score"
Aggregation = Literal["mean", "macro", "group", "sum", "cost"]
#: ``overall`` of a macro table: the mean of the two levels (table II, multiple choice) or of the
#: nine categories (table III, open-ended)
Overall = Literal["levels", "categories"]
#: which questions count towards a metric: every one (``all``), a level's, or one category's
SCOPES: tuple[str, ...] = ("all", "narrative", "cultural", *CATEGORIES)


class Categorised(Protocol):
    """A scored record: every record has its question's category."""

    @property
    def category(self) -> str: ...


#: the record type a metric reads; contravariant (a metric consumes records), so a table of any
#: record type is a ``MetricTable[Never]``: what lists or documents tables without scoring one
R = TypeVar("R", bound=Categorised, contravariant=True)


def in_scope(scope: str, category: str) -> bool:
    """Whether a question of ``category`` counts towards a metric of ``scope``."""
    if scope == "all":
        return True
    if scope == "narrative":
        return category in NARRATIVE
    if scope == "cultural":
        return category in CULTURAL
    return scope == category


@dataclass(frozen=True)
class Metric(Generic[R]):
    """One metric of a task."""

    name: str
    description: str  # what it measures (docs/metrics.md)
    scope: str  # one of SCOPES
    #: the value a record in scope contributes; None: it does not count (e.g. an invalid answer
    #: for ``pick_A``, an unscored response for ``recall``)
    value: Callable[[R], float | None]
    aggregation: Aggregation
    higher_is_better: bool = True
    shown: bool = True  # a column of the leaderboard's tables
    headline: bool = False  # ``naru-eval score`` prints its bootstrap interval
    #: a count of the run (responses scored, the unscored share, the cost), not a score of the
    #: model: kept when the table's ``unscorable`` says the payloads give no score
    count: bool = False

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"metric {self.name}: scope {self.scope!r} is not one of {', '.join(SCOPES)}")

    def of(self, record: R) -> float | None:
        """The value ``record`` contributes to this metric; None when it does not count."""
        if not in_scope(self.scope, record.category):
            return None
        return self.value(record)

    @property
    def per_item(self) -> bool:
        """A mean of per-question values (``mean`` or ``macro``): what the bootstrap resamples."""
        return self.aggregation in ("mean", "macro")


@dataclass(frozen=True)
class MetricTable(Generic[R]):
    """The metrics of one task kind, in the order lmms-eval reports them."""

    kind: str  # "mcq", "circular", "open"
    unit: str  # how the values read ("%", "recall 0-1")
    digits: int  # decimals of the leaderboard's cells
    overall: Overall  # how the macro ``overall`` is formed (when the table has one)
    #: the metric whose payload carries the whole record (the one a sample log is read from)
    record_metric: str
    metrics: tuple[Metric[R], ...]
    #: the ``group`` aggregation, over the payloads (or records) of a log
    group: Callable[[Iterable[JSONMapping]], float | None] | None = None
    #: whether a metric's payloads cannot give a score (naru_open: the judge could not be reached
    #: for too many responses); the metric is then None. Count metrics' payloads never trip it.
    unscorable: Callable[[Sequence[JSONMapping]], bool] | None = None

    def __post_init__(self) -> None:
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names) or self.record_metric not in names:
            raise ValueError(f"{self.kind}: metric names must be unique and include {self.record_metric!r}")

    def __iter__(self) -> Iterator[Metric[R]]:
        return iter(self.metrics)

    def __getitem__(self, name: str) -> Metric[R]:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"{self.kind} has no metric {name!r}; known: {', '.join(self.names)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics)

    @property
    def macro(self) -> tuple[str, ...]:
        """The macro metrics (means of category means)."""
        return tuple(m.name for m in self.metrics if m.aggregation == "macro")

    @property
    def per_item(self) -> tuple[str, ...]:
        """The metrics the bootstrap gives an interval for (means and macro means)."""
        return tuple(m.name for m in self.metrics if m.per_item)

    @property
    def headline(self) -> tuple[str, ...]:
        """The metrics ``naru-eval score`` prints an interval beside."""
        return tuple(m.name for m in self.metrics if m.headline)

    @property
    def columns(self) -> tuple[str, ...]:
        """The leaderboard's metric columns, in order."""
        return tuple(m.name for m in self.metrics if m.shown)

    def payloads(self, record: Payload, sample: R) -> dict[str, Payload]:
        """One payload per metric: ``record`` with the metric's value under ``score`` (a per-item
        mean or sum, in scope) or :data:`MACRO_KEY` (a macro mean)."""
        out: dict[str, Payload] = {}
        for m in self.metrics:
            payload = dict(record)
            value = m.of(sample)
            if value is not None:
                payload[MACRO_KEY if m.aggregation == "macro" else "score"] = value
            out[m.name] = payload
        return out

    def aggregate(self, name: str, items: Iterable[JSONMapping]) -> float | None:
        """Metric ``name`` from its payloads, as lmms-eval's aggregation hook computes it."""
        return self.aggregate_as(self[name].aggregation, items)

    def aggregate_as(self, aggregation: Aggregation, items: Iterable[JSONMapping]) -> float | None:
        """The payloads of one metric aggregated by ``aggregation`` (lmms-eval's hooks know the
        aggregation, not the metric); None when :attr:`unscorable` says they give no score."""
        items = list(items)
        if self.unscorable is not None and self.unscorable(items):
            return None
        if aggregation == "mean":
            return aggregate_score(items)
        if aggregation == "macro":
            return aggregate_macro(items, self.overall)
        if aggregation in ("sum", "cost"):
            return aggregate_sum(items)
        if self.group is None:
            raise ValueError(f"{self.kind}: a group aggregation, and the table has no group function")
        return self.group(items)


# --------------------------------------------------------------------------- aggregations


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate_score(items: Iterable[JSONMapping]) -> float | None:
    """Mean ``score`` of the payloads in scope; None (shown N/A) when no question is in scope."""
    return _mean([number(x["score"]) for x in items if "score" in x])


def aggregate_sum(items: Iterable[JSONMapping]) -> float | None:
    """The sum of the scores; None (unknown) when an item's value is unknown (``cost_unknown``:
    ``judge_cost_usd`` of a judge without a price), never a partial sum shown as the total."""
    items = list(items)
    if any(x.get("cost_unknown") for x in items):
        return None
    return float(sum(number(x["score"]) for x in items if "score" in x))


def macro_levels(category_means: Mapping[str, float | None], overall: str = "levels") -> dict[str, float | None]:
    """The authors' aggregation: ``narrative`` = mean of the N.1-N.4 values, ``cultural`` = mean
    of the C.1-C.5 values; ``overall`` = (narrative + cultural) / 2 (``overall="levels"``, table
    II, multiple choice) or the mean of the nine category values (``overall="categories"``,
    table III, open-ended).

    Categories with no value (None or NaN: no question in scope) are left out of the means; a
    level with none is None, and ``overall`` is then the other level's mean."""
    if overall not in ("levels", "categories"):
        raise ValueError(f"overall={overall!r}: expected 'levels' or 'categories'")

    def present(cats: Sequence[str]) -> list[float]:
        vals = [category_means.get(c) for c in cats]
        return [float(v) for v in vals if v is not None and not math.isnan(v)]

    nar, cul = _mean(present(NARRATIVE)), _mean(present(CULTURAL))
    if overall == "levels":
        ov = _mean([v for v in (nar, cul) if v is not None])
    else:
        ov = _mean(present(CATEGORIES))
    return {"overall": ov, "narrative": nar, "cultural": cul}


def aggregate_macro(items: Iterable[JSONMapping], overall: str = "levels") -> float | None:
    """A macro metric from its payloads: the mean of :data:`MACRO_KEY` per category, then
    :func:`macro_levels`. Out-of-scope payloads carry no value, so the ``narrative`` payloads give
    the narrative mean and the ``overall`` payloads the overall one."""
    by_cat: dict[str, list[float]] = {}
    for x in items:
        if MACRO_KEY in x:
            by_cat.setdefault(str(x["category"]), []).append(number(x[MACRO_KEY]))
    if not by_cat:
        return None
    unknown = sorted(set(by_cat) - set(CATEGORIES))
    if unknown:
        raise ValueError(f"payload category {unknown[0]!r} is not one of {', '.join(CATEGORIES)}")
    return macro_levels({c: _mean(v) for c, v in by_cat.items()}, overall)["overall"]


def compute(
    table: MetricTable[R], samples: Sequence[R], payloads: Callable[[R], Mapping[str, Payload]]
) -> dict[str, float | None]:
    """Every metric of ``table`` from ``samples``, exactly as lmms-eval's aggregation computes it
    from the payloads (``payloads``: the task's ``process_results`` value of a sample)."""
    logged = [payloads(s) for s in samples]
    return {m.name: table.aggregate(m.name, (p[m.name] for p in logged)) for m in table}


def metrics_markdown(tables: Sequence[MetricTable[Never]]) -> str:
    """docs/metrics.md's metric table: one row per metric of every table."""
    lines = [
        "| task kind | metric | scope | aggregation | higher is better | leaderboard column | what it is |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in tables:
        for m in t:
            lines.append(
                f"| {t.kind} ({t.unit}) | `{m.name}` | {m.scope} | {m.aggregation} | "
                f"{'yes' if m.higher_is_better else 'no'} | {'yes' if m.shown else 'no'} | {m.description} |"
            )
    return "\n".join(lines) + "\n"
