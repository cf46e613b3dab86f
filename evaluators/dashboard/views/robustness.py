"""The Robustness page's words for a newcomer: what it answers, the one action its report suggests, and a
glossary of its terms."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluators import grammar
from evaluators.grammar import robustness

QUESTION = (
    "Do answers stay right when the question is rephrased or its SQL template changes? This page asks the same "
    "questions about a company's tables in several wordings, with the right answer known from SQL, and shows "
    "where the answers stay right, stay wrong, or depend on the wording."
)

GLOSSARY = """
- **SQL template**: a query with blanks (`SELECT ... WHERE name = {client}`); filled with a value it gives one
  question logic and, run on the tables, its right answer (the ground truth).
- **Text template** (or variant): one wording of that question in plain language; each question logic is asked in
  several wordings.
- **Semantic group**: one filled SQL query with all its wordings: the same question asked several ways.
- **Gap group**: no wording was answered right. The system does not know this (a knowledge gap), whatever the
  wording: add the facts to the sources, or check the retriever finds them.
- **Robust group**: every wording was answered right.
- **Non-robust group**: some wordings right, some wrong. The wording decides the answer: this is what the page is
  for.
- **λ (lambda)**: the share of items in gap groups.
- **R (robustness)**: right answers ÷ (items − items in gap groups): how often the answer is right when the
  system can know it.
- **Acc (accuracy)**: R × (1 − λ), the same as right answers ÷ items.
- **Blame** (context comparison), for each wrong answer of a non-robust group: an **LM shortfall** when a right
  wording of the same question saw the same documents (the generator failed, not retrieval);
  a **possible retrieval failure** when no right wording saw them; **unknown** when the item records no
  retrieved documents.
- **(retrieval) columns**: R and Acc with LM shortfalls counted as right, so they judge the retriever alone.
- **Retrieval hit**: the share of items whose retrieved documents include every document that holds the
  answer.
- **Cluster**: the items grouped by SQL template or by text template (the radio above), to see which query
  logic or which wording goes wrong.
"""


GROUPS = "groups: gap · robust · non-robust"
# Column widths in pixels (tables.sized): each header reads whole, and a table sums to at most tables.TABLE_PX.
CLUSTER_PX = {"cluster": 140, "items": 50, "correct": 62, "gap items": 80, "lambda": 62, "R": 45, "Acc": 45}
CLUSTER_PX |= {GROUPS: 210, "unscored": 80}
RETRIEVAL_PX = {"cluster": 140, "R (retrieval)": 110, "Acc (retrieval)": 120, "retrieval hit": 100}


def cluster_tables(clusters: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Report.clusters() as the page shows it: the answers' figures with the three group counts in one
    column ("0 · 1 · 1"), and the retrieval figures apart."""
    counts = clusters[["gap groups", "robust groups", "non-robust groups"]].astype(int).astype(str)
    answers = clusters[["cluster", "items", "correct", "gap items", "lambda", "R", "Acc"]].assign(
        **{GROUPS: counts.agg(" · ".join, axis=1), "unscored": clusters["unscored"]}
    )
    return answers, clusters[["cluster", *list(RETRIEVAL_PX)[1:]]]


def suggestion(rep: robustness.Report) -> str:
    """The one thing the report says to do first, in plain words."""
    every = rep.plain.get(grammar.ALL)
    if every is None or not every.items:
        return "Nothing is judged yet: run `python -m evaluators grammar-eval` on this run."
    groups, blame = every.groups, rep.attribution()
    if groups[grammar.NON_ROBUST]:
        wrong = sum(blame.values())
        if blame[grammar.LM] >= blame[grammar.RETRIEVAL]:
            return (
                f"Fix the generator first (its prompt or model): in {blame[grammar.LM]} of the {wrong} wrong answers "
                "to a rephrased question, the model had the same documents as a wording it answered right. Open the "
                "non-robust groups below and compare the wordings side by side."
            )
        return (
            f"Fix retrieval first: {blame[grammar.RETRIEVAL]} of the {wrong} wrong answers to a rephrased question "
            "came with other documents than a wording answered right. Make the retriever find the same documents "
            "for every wording; the non-robust groups below show which."
        )
    if groups[grammar.GAP]:
        return (
            f"No wording changes an answer, but {groups[grammar.GAP]} question(s) are never answered right (gap "
            "groups): add the missing facts to the sources, or check that the retriever finds them."
        )
    return "Nothing to fix here: every question is answered right in every wording."


def intro() -> None:
    """What the page answers, and its terms in a glossary."""
    st.markdown(QUESTION)
    with st.expander("Glossary: groups, λ, R, Acc, blame"):
        st.markdown(GLOSSARY)
