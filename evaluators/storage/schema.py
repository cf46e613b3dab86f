"""The database's schema: numbered migrations, appended and never edited (store.migrate() applies them)."""

from __future__ import annotations

# Numbered migrations: append, never edit. Version N is MIGRATIONS[N - 1].
MIGRATIONS: list[str] = [
    """
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,
        judge VARCHAR NOT NULL,
        params VARCHAR NOT NULL,          -- JSON
        prompt_hashes VARCHAR NOT NULL,   -- JSON {prompt name: sha256[:12]}
        status VARCHAR NOT NULL,          -- running | finished | failed
        n_items INTEGER NOT NULL,
        created_at TIMESTAMP NOT NULL,
        finished_at TIMESTAMP,
        stats VARCHAR NOT NULL DEFAULT '{}',  -- JSON: calls, cache hits, tokens, cost
        error VARCHAR NOT NULL DEFAULT ''
    );
    CREATE TABLE items (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        query VARCHAR NOT NULL,
        sources VARCHAR[] NOT NULL,
        response VARCHAR NOT NULL,
        reference VARCHAR,
        metadata VARCHAR NOT NULL,        -- JSON object
        PRIMARY KEY (run_id, item_id)
    );
    CREATE TABLE components (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        kind VARCHAR NOT NULL,
        idx INTEGER NOT NULL,
        text VARCHAR NOT NULL,
        parent INTEGER,
        call_key VARCHAR
    );
    CREATE TABLE verdicts (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        metric VARCHAR NOT NULL,
        component_kind VARCHAR NOT NULL,
        component_idx INTEGER NOT NULL,
        target VARCHAR NOT NULL,
        value DOUBLE,
        status VARCHAR NOT NULL,
        score DOUBLE,                     -- renamed to evidence by migration 3
        call_key VARCHAR,
        detail VARCHAR NOT NULL
    );
    CREATE TABLE scores (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        metric VARCHAR NOT NULL,
        value DOUBLE,
        n_scored INTEGER NOT NULL,
        n_total INTEGER NOT NULL,
        status VARCHAR NOT NULL,
        PRIMARY KEY (run_id, item_id, metric)
    );
    CREATE TABLE judge_calls (
        key VARCHAR PRIMARY KEY,
        model VARCHAR NOT NULL,
        prompt_name VARCHAR NOT NULL,
        prompt_hash VARCHAR NOT NULL,
        messages VARCHAR NOT NULL,        -- JSON list of {role, content}
        params VARCHAR NOT NULL,          -- JSON
        reply VARCHAR,
        status VARCHAR NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        cost DOUBLE,
        latency_ms DOUBLE NOT NULL,
        error VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL
    );
    CREATE TABLE triage (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        label VARCHAR NOT NULL,
        component VARCHAR NOT NULL,
        note VARCHAR NOT NULL,
        author VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL
    );
    CREATE INDEX verdicts_item ON verdicts (run_id, item_id);
    CREATE INDEX components_item ON components (run_id, item_id);
    """,
    # 2: GRAMMAR's per-item correctness against SQL ground truth (evaluators/grammar.py).
    """
    CREATE TABLE grammar_correctness (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        group_id VARCHAR NOT NULL,
        sql_template VARCHAR NOT NULL,
        text_template VARCHAR NOT NULL,
        correct BOOLEAN,                  -- NULL unless status = 'ok'
        status VARCHAR NOT NULL,
        judge VARCHAR NOT NULL,
        detail VARCHAR NOT NULL,
        call_key VARCHAR,
        retrieved_doc_ids VARCHAR[] NOT NULL,
        true_doc_ids VARCHAR[] NOT NULL,
        retrieval_hit BOOLEAN,            -- NULL when the item has no true document ids
        created_at TIMESTAMP NOT NULL,
        PRIMARY KEY (run_id, item_id)
    );
    """,
    # 3: verdicts.score held the judge's continuous evidence (P("1"), a cosine, a rating), not a score.
    # DuckDB will not rename a column an index depends on, so the index is rebuilt around the rename.
    """
    DROP INDEX verdicts_item;
    ALTER TABLE verdicts RENAME COLUMN score TO evidence;
    CREATE INDEX verdicts_item ON verdicts (run_id, item_id);
    """,
    # 4: who evaluates a run and whether it still lives, and which input each run and item is for.
    # runs.status: running | finished | finished with failures | failed; RUN_STATUS_SQL reads a
    # running run whose owner stopped beating as interrupted.
    """
    ALTER TABLE runs ADD COLUMN owner VARCHAR;           -- host:pid:token of the evaluating process
    ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
    ALTER TABLE runs ADD COLUMN owner_host VARCHAR;
    ALTER TABLE runs ADD COLUMN heartbeat_at TIMESTAMP;  -- refreshed by the owner's every write
    ALTER TABLE runs ADD COLUMN heartbeat_s DOUBLE;      -- the owner's longest pause between writes
    ALTER TABLE items ADD COLUMN content_hash VARCHAR;   -- Item.content_hash() these results are for
    CREATE TABLE run_inputs (                            -- the run's input: item ids and content hashes
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        content_hash VARCHAR NOT NULL,
        PRIMARY KEY (run_id, item_id)
    );
    """,
    # 5: who started each run: the dashboard's login email, else the OS user; '' for older runs.
    """
    ALTER TABLE runs ADD COLUMN started_by VARCHAR DEFAULT '';
    """,
    # 6: how sure each verdict is (p = P(match is 1), how p was obtained, the judge tier that
    # decided it), and how many verdicts of a score fell inside the uncertainty band.
    """
    ALTER TABLE verdicts ADD COLUMN p DOUBLE;
    ALTER TABLE verdicts ADD COLUMN p_kind VARCHAR;
    ALTER TABLE verdicts ADD COLUMN tier VARCHAR;
    ALTER TABLE scores ADD COLUMN n_unsure INTEGER DEFAULT 0;
    """,
    # 7: people's labels of the judge: a Table-2 rule right or wrong on an item, or one verdict
    # corrected. Appended, never updated: the latest label per target counts, the history stays.
    """
    CREATE TABLE labels (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        rule VARCHAR,                     -- a rule label: 'T2.5'; else NULL
        metric VARCHAR,                   -- a verdict correction: the metric and component index
        component_idx INTEGER,
        label INTEGER NOT NULL,           -- 1 or 0
        note VARCHAR NOT NULL,
        author VARCHAR NOT NULL,
        origin VARCHAR NOT NULL,          -- review | import
        created_at TIMESTAMP NOT NULL
    );
    """,
    # 8: peer scores imported with a run's input (RAGAS result columns, DeepEval metric results,
    # Langfuse scores), kept beside ours and never mixed into them. Written with their item's row.
    """
    CREATE TABLE imported_scores (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        origin VARCHAR NOT NULL,          -- ragas | deepeval | langfuse
        metric VARCHAR NOT NULL,          -- the peer tool's own metric name
        value DOUBLE,                     -- NULL: the peer tool gave no score
        PRIMARY KEY (run_id, item_id, origin, metric)
    );
    """,
    # 9: the endpoint (api base) that answered each judge call, for judges behind several replicas;
    # NULL for the provider's own endpoint and for calls stored before.
    """
    ALTER TABLE judge_calls ADD COLUMN endpoint VARCHAR;
    """,
    # 10: each run's scores kept pivoted, one row per item, so the dashboard reads a run of a million
    # items without regrouping its scores and verdicts. Rewritten for the items of every write
    # (refresh_wide); the metric columns are added as metrics appear: "m" (the score, NULL when
    # unscored), "m:scored" and "m:unsure" (the verdicts behind it). migrate() fills it for old runs.
    """
    CREATE TABLE run_wide (
        run_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        query VARCHAR NOT NULL,           -- the first 120 characters
        n_failed BIGINT NOT NULL,         -- failed verdicts
        failed_metrics VARCHAR NOT NULL   -- the unscored metrics with their status: 'gr:timeout, sqc:unsure'
    );
    """,
    # 11: a run imported from a run file (storage/runfile.py): who imported it, when, how and from which
    # file, beside who the file says sent it (a claim, never a fact); and the judge calls it brought, kept
    # out of the request cache: imported_for names the run they came with, NULL marks this database's own.
    """
    ALTER TABLE judge_calls ADD COLUMN imported_for VARCHAR;
    CREATE TABLE run_imports (
        run_id VARCHAR PRIMARY KEY,
        imported_by VARCHAR NOT NULL,     -- the login email, else the OS user of the CLI or the server
        imported_at TIMESTAMP NOT NULL,
        via VARCHAR NOT NULL,             -- cli | upload | inbox
        file_name VARCHAR NOT NULL,
        file_sha256 VARCHAR NOT NULL,
        claimed_by VARCHAR NOT NULL       -- who the file says sent it: its run_file.started_by
    );
    """,
    # 12: each score's expected value (metrics/thelma.expected_of: the mean of its verdicts' p, unsure ones
    # included; the same at every band), NULL for a metric without one and for scores written before it;
    # run_wide carries it per metric as "m:ev" (store.migrate adds the columns for the metrics it has).
    """
    ALTER TABLE scores ADD COLUMN expected DOUBLE;
    """,
]
