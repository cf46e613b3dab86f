"""The source ledger: what each retrieved source (a document or chunk) does across runs, as pure logic.

A source is known by `metadata["source_ids"][i]` when the item's metadata carries a list aligned with
its sources (importers of Phoenix and Langfuse traces write one), else by source_key(text): the first 12
hex digits of sha256 over the text with its whitespace collapsed, so the same chunk retrieved by two
items or two runs is one source. It is shown by source_name(text), its first words. The counting itself happens in DuckDB (queries.ledger.source_ledger); this
module holds the definitions the SQL is written from (tests hold the two equal):
- essential share: SP1's confident 1s over its confident verdicts on that source; unsure and failed
  verdicts are counted apart, never as 0;
- claims it supports: GR verdicts of 1 whose judge named the source sentence that backs the claim. The
  offline judge does (its detail reads "supported: best source sentence '...'"); an LLM judge answers
  only 0 or 1 for the whole source set, so its supported claims count as "source unknown";
- beside unsupported claims: retrievals in items where some GR claim was a confident 0.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import pandas as pd

KEY_LENGTH = 12
# A source is shown by its first words: at most this many characters, cut at a word's end.
NAME_LENGTH = 50
NAME_CUT = "…"
# Python's str.split() splits on every character whose isspace() is true; the SQL key must too. Written
# out: finding them among all 1.1M code points took 0.09 s of every start (tests check the list).
SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
WHITESPACE_CLASS = "[" + "".join(f"\\x{{{ord(c):04x}}}" for c in SPACES) + "]"  # RE2 (DuckDB) syntax
# Where the offline judge quotes the source sentence that supports a claim (evidence.support): the
# quote is Python's repr of the sentence, in single quotes, or double ones when it holds a single quote.
QUOTE_PATTERNS = (r"best source sentence '(.*?)' \(cosine", r'best source sentence "(.*?)" \(cosine')
SUPPORTED_PREFIX = "supported: "
# A quote is matched to the source that holds its start: its first sentence (a quote may be a window of
# two sentences, the second from the next source), at most QUOTE_MATCH characters (a quote may be cut
# at 160 characters with "…").
QUOTE_MATCH = 60
SENTENCE_END = ". "


def normalise(text: str) -> str:
    """The text with runs of whitespace collapsed to one space and none at either end."""
    return " ".join(text.split())


def source_key(text: str) -> str:
    """A source's text key: the first 12 hex digits of sha256 of its whitespace-collapsed text."""
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()[:KEY_LENGTH]


def source_name(text: str) -> str:
    """A source as people read it: its whitespace-collapsed text, cut after at most NAME_LENGTH
    characters at a word's end (a single longer word is cut where it stands), with "…" when cut."""
    norm = normalise(text)
    if len(norm) <= NAME_LENGTH:
        return norm
    head = norm[: NAME_LENGTH + 1]
    return (head.rsplit(" ", 1)[0] if " " in head else norm[:NAME_LENGTH]) + NAME_CUT


def source_ids(sources: Sequence[str], metadata: Mapping[str, object]) -> list[str]:
    """Each source's identity in one item: its id from metadata["source_ids"] when that is a list as long
    as the sources (a missing entry falls back), else its text key."""
    ids = metadata.get("source_ids")
    aligned = isinstance(ids, list) and len(ids) == len(sources)
    return [
        str(ids[i]) if aligned and ids[i] is not None else source_key(text)  # type: ignore[index]
        for i, text in enumerate(sources)
    ]


def supporting_quote(detail: str) -> str | None:
    """The start of the source sentence a supported GR verdict quotes (normalised, its first sentence,
    at most QUOTE_MATCH characters), or None when the verdict names none (an LLM judge, an unsupported claim)."""
    if not detail.startswith(SUPPORTED_PREFIX):
        return None
    for pattern in QUOTE_PATTERNS:
        found = re.search(pattern, detail)
        if found and found.group(1):
            return normalise(found.group(1).removesuffix("…")).split(SENTENCE_END)[0][:QUOTE_MATCH] or None
    return None


def supporting_sources(detail: str, sources: Sequence[str]) -> list[int]:
    """The positions of the sources that hold the quoted supporting sentence (empty: source unknown)."""
    quote = supporting_quote(detail)
    if not quote:
        return []
    return [i for i, text in enumerate(sources) if quote in normalise(text)]


@dataclass(frozen=True)
class Thresholds:
    """When a source lands on a list. Retrievals are counted over every run in the ledger.

    min_retrieved: a source retrieved fewer times is on neither list (too little to say);
    dead_max_essential: dead weight when SP1 judged it essential in at most this share;
    stale_min_unsupported: possibly stale or misleading when at least this share of its retrievals
    (where GR decided some claim) sat beside an unsupported claim.
    """

    min_retrieved: int = 3
    dead_max_essential: float = 0.2
    stale_min_unsupported: float = 0.5


DEFAULT_THRESHOLDS = Thresholds()


def essential_share(n_essential: int, n_not: int) -> float | None:
    """SP1's share of confident verdicts that found the source essential; None when none was confident."""
    decided = n_essential + n_not
    return n_essential / decided if decided else None


def is_dead_weight(n_retrieved: int, n_essential: int, n_not: int, th: Thresholds = DEFAULT_THRESHOLDS) -> bool:
    """Retrieved often, rarely essential: a source the retriever should stop returning."""
    share = essential_share(n_essential, n_not)
    return n_retrieved >= th.min_retrieved and share is not None and share <= th.dead_max_essential


def is_stale(
    n_retrieved: int, n_beside_unsupported: int, n_gr_decided: int, th: Thresholds = DEFAULT_THRESHOLDS
) -> bool:
    """Present when claims go unsupported: a source whose text may be out of date or misleading."""
    return (
        n_retrieved >= th.min_retrieved
        and n_gr_decided > 0
        and n_beside_unsupported / n_gr_decided >= th.stale_min_unsupported
    )


# The export's columns (the CLI's `ledger` command and the Sources page's download write the same file).
CSV_COLUMNS = (
    "source",
    "name",
    "source_id",
    "text_key",
    "n_retrieved",
    "n_runs",
    "sp1_essential",
    "sp1_not",
    "sp1_unsure",
    "sp1_failed",
    "sp1_missing",
    "essential_share",
    "claims_supported",
    "claims_source_unknown",
    "beside_unsupported",
    "gr_decided",
    "unsupported_share",
    "dead_weight",
    "stale",
    "text",
)


def to_csv(frame: pd.DataFrame) -> str:
    """A ledger (queries.ledger.source_ledger without a limit) as CSV text: a share with nothing decided is empty."""
    return frame[list(CSV_COLUMNS)].to_csv(index=False, lineterminator="\n")
