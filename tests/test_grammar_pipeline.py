"""GRAMMAR's demo domain and reference pipeline: the committed corpus is in sync with its spec."""
from __future__ import annotations

from evaluators import grammar
from evaluators.grammar import generate, pipeline


def test_demo_templates_load_and_the_committed_corpus_is_in_sync() -> None:
    templates = generate.load_templates(grammar.TEMPLATES)
    with generate.open_source(grammar.COMPANY_SQL) as con:
        testset = generate.generate(con, templates)
        docs = pipeline.render_corpus(con)
    assert (len(templates), len({c.group for c in testset.cases}), len(testset.cases)) == (12, 127, 381)
    assert docs == pipeline.load_corpus(grammar.CORPUS), "data/grammar/corpus.jsonl is stale: re-render it"
    text = {d.id: d.text for d in docs}
    assert len(docs) == 32 and "sector" not in text["client:C08"]  # an omitted fact: a coverage gap
    assert all(set(c.true_doc_ids) <= set(text) for c in testset.cases)
