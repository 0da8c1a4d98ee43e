"""A deterministic stand-in for the remote LLM judge, served by tests/stubs/openai_server.py.

It reads the judge's own prompts (as the real model would) and answers in the requested JSON
schema (``response_format.json_schema.name``):

* ``FactList``: the reference split into sentences, one fact each;
* ``CoverageReport``: a fact is ``covered`` when its text appears in the fenced response
  (case and spaces ignored), ``partial`` when its first three words do, else ``not_covered``;
* ``MinervaScore``: 2 when every reference sentence appears, 1 when some do, else 0;
* ``McqChoice``: the option whose text the response contains (or "the second one"), else ``none``.

Misbehaviour for the tests is switched on by tokens in the response: ``MALFORMED`` (invalid
JSON, every time), ``MISMATCH`` (one id dropped, every time), ``MISMATCH_ONCE`` (dropped on the
first attempt only, fixed when the corrective note comes). The fake stands in for the remote
model only; everything else is the real code path (SDK, retries, cache, parsing).
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter

from tests.helpers.stubs import Reply, StubRequest

_SENT = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def squash(text: str) -> str:
    return " ".join(text.casefold().split())


def between(text: str, start: str, end: str) -> str:
    i = text.index(start) + len(start)
    return text[i : text.index(end, i)].strip("\n")


def fenced_response(user: str) -> str:
    m = re.search(r"<<<RESPONSE ([0-9a-f]+)>>>\n(.*)\n<<<END RESPONSE \1>>>", user, re.S)
    assert m, "no fenced response in the judge prompt"
    return m.group(2)


class FakeJudge:
    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self._lock = threading.Lock()

    def __call__(self, req: StubRequest) -> str | Reply:
        body = req.body
        name = body["response_format"]["json_schema"]["name"]
        msgs = body["messages"]
        user = msgs[1]["content"]
        retry = len(msgs) > 2  # the corrective note of attempt >= 2
        with self._lock:
            self.counts[name] += 1
        if name == "FactList":
            ref = between(user, "<<<REFERENCE>>>\n", "\n<<<END REFERENCE>>>")
            return json.dumps({"facts": sentences(ref)}, ensure_ascii=False)
        if name == "CoverageReport":
            facts = json.loads(between(user, "REFERENCE FACTS (JSON list of id and text):\n", "\n\nMODEL RESPONSE"))
            resp = fenced_response(user)
            if "MALFORMED" in resp:
                return '{"verdicts": [{"fact_id": "F1", "verdict": "cov'
            verdicts = []
            for f in facts:
                text = f["text"].rstrip(".。")
                head = " ".join(text.split()[:3])
                if squash(text) in squash(resp):
                    v, ev = "covered", text
                elif len(text.split()) > 3 and squash(head) in squash(resp):
                    v, ev = "partial", head
                else:
                    v, ev = "not_covered", ""
                verdicts.append({"fact_id": f["id"], "verdict": v, "evidence": ev})
            if "MISMATCH" in resp and ("MISMATCH_ONCE" not in resp or not retry):
                verdicts = verdicts[:-1] + [{"fact_id": "F99", "verdict": "covered", "evidence": ""}]
            return json.dumps({"verdicts": verdicts}, ensure_ascii=False)
        if name == "MinervaScore":
            ref = between(user, "<<<REFERENCE>>>\n", "\n<<<END REFERENCE>>>")
            resp = squash(fenced_response(user))
            hits = [squash(s.rstrip(".。")) in resp for s in sentences(ref)]
            score = 2 if hits and all(hits) else 1 if any(hits) else 0
            return json.dumps({"rationale": "fake", "score": score})
        if name == "McqChoice":
            resp = squash(fenced_response(user))
            opts = re.findall(r"^\(([ABCD])\) (.*)$", between(user, "OPTIONS:\n", "\n\nMODEL RESPONSE"), re.M)
            found = [letter for letter, text in opts if squash(text) in resp]
            ordinals = {"first": "A", "second": "B", "third": "C", "fourth": "D"}
            found += [letter for word, letter in ordinals.items() if f"the {word} one" in resp]
            return json.dumps({"letter": found[0] if len(found) == 1 else "none"})
        raise AssertionError(f"unexpected schema {name}")
