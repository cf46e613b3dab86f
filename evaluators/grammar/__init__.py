"""GRAMMAR (Li, Liu, Gao 2024) on DuckDB: test sets with SQL ground truth, and robustness by semantic group.

The package's modules import one way, each only from those above it in this list:
- this module: constants only (the demo domain's paths, item metadata keys, group and blame names);
- `robustness`: correctness judging against the ground truth, gap / robust / non-robust groups,
  R and Acc, the paper's context comparison, and the Robustness page's read model;
- `generate`: the paper's Algorithm 1, SQL and text templates to a test set;
- `pipeline`: the demo corpus and a reference RAG pipeline (BM25 or dense retrieval, an answer);
- `runs`: end to end over the engine's runner: judge a run's correctness, run the pipeline, build the demo;
- `cli`: grammar-generate, grammar-run, grammar-eval and grammar-demo.
"""

from evaluators.core.resources import resource

# The demo domain: a fictitious company database, a corpus rendered from it, hand-written templates.
DATA_DIR = resource("data", "grammar")
COMPANY_SQL = DATA_DIR / "company.sql"
TEMPLATES = DATA_DIR / "templates.json"
CORPUS_SPEC = DATA_DIR / "corpus_spec.json"
CORPUS = DATA_DIR / "corpus.jsonl"

# Item metadata written by the generator and the pipeline (plain keys, so the dashboard's
# metadata filters can use them).
META_GROUP = "grammar_group"
META_SQL_TEMPLATE = "grammar_sql_template"
META_TEXT_TEMPLATE = "grammar_text_template"
META_SQL = "grammar_sql"
META_TRUE_DOCS = "true_doc_ids"
META_RETRIEVED = "retrieved_doc_ids"
META_GENERATOR_STATUS = "generator_status"

# Group types, the modules a wrong answer is blamed on, and how items are clustered.
GAP, ROBUST, NON_ROBUST = "gap", "robust", "non_robust"
LM, RETRIEVAL, UNKNOWN = "lm", "retrieval", "unknown"
ALL = "(all)"
CLUSTER_BY = ("sql_template", "text_template")
