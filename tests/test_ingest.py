"""Input loading: every format gives the same Items, and bad input is reported line by line."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

from evaluators.core.records import Item
from evaluators.runs.ingest import MAX_TEXT_BYTES, InputError, items_from_frame, load_items

ROWS = [
    {"id": "q1", "query": "Who wrote Dune?", "sources": ["Dune is a 1965 novel by Frank Herbert."],
     "response": "Frank Herbert.", "reference": "Frank Herbert", "metadata": {"split": "dev"}},
    {"id": "q2", "query": "  Where is Paris?\n", "sources": ["Paris is in France.", "It is big."],
     "response": "In France.\nIt is the capital.", "metadata": {}},
]
EXPECTED = [
    Item("q1", "Who wrote Dune?", ("Dune is a 1965 novel by Frank Herbert.",), "Frank Herbert.",
         "Frank Herbert", {"split": "dev"}),
    Item("q2", "  Where is Paris?\n", ("Paris is in France.", "It is big."),
         "In France.\nIt is the capital.", None, {}),
]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    """Our CSV convention: sources and metadata as JSON text in their cells."""
    columns = sorted({key for row in rows for key in row})
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([json.dumps(row[c]) if isinstance(row.get(c), (list, dict))
                             else row.get(c, "") for c in columns])
    return path


def problems_of(path_or_frame) -> list[str]:
    with pytest.raises(InputError) as caught:
        if isinstance(path_or_frame, pd.DataFrame):
            items_from_frame(path_or_frame, origin="frame")
        else:
            load_items(path_or_frame)
    assert all(problem in str(caught.value) for problem in caught.value.problems[:100])
    return caught.value.problems


def assert_items(items: list[Item], expected: list[Item] = EXPECTED) -> None:
    """Item equality leaves metadata out, so compare it too."""
    assert items == expected
    assert [i.metadata for i in items] == [e.metadata for e in expected]


# --- each format round trip -------------------------------------------------------------------

def test_jsonl_round_trip_ignores_blank_lines_and_keeps_texts_verbatim(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("\n" + json.dumps(ROWS[0]) + "\n   \n" + json.dumps(ROWS[1]) + "\n\n")
    assert_items(load_items(path))
    assert_items(load_items(str(path)))


def test_jsonl_with_crlf_line_ends_and_byte_order_mark(tmp_path):
    path = tmp_path / "data.JSONL"
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(json.dumps(r) for r in ROWS).encode())
    assert_items(load_items(path))


def test_csv_round_trip_with_json_cells_and_multiline_text(tmp_path):
    assert_items(load_items(write_csv(tmp_path / "data.csv", ROWS)))


def test_parquet_round_trip_with_list_column(tmp_path):
    path = tmp_path / "data.parquet"
    frame = pd.DataFrame([{k: v for k, v in r.items() if k != "metadata"} for r in ROWS])
    frame.to_parquet(path)
    expected = [Item(e.id, e.query, e.sources, e.response, e.reference, {}) for e in EXPECTED]
    assert_items(load_items(path), expected)


def test_parquet_round_trip_with_json_text_sources_and_metadata(tmp_path):
    path = tmp_path / "data.parquet"
    frame = pd.DataFrame(ROWS)
    frame["sources"] = frame["sources"].map(json.dumps)
    frame["metadata"] = frame["metadata"].map(json.dumps)
    frame.to_parquet(path)
    assert_items(load_items(path))


def test_dataframe_round_trip_treats_nan_as_absent(tmp_path):
    frame = pd.DataFrame(ROWS)  # q2 has no reference: pandas fills NaN
    assert frame["reference"].isna().iloc[1]
    assert_items(items_from_frame(frame))


def test_ragas_field_names(tmp_path):
    ragas = [{"user_input": r["query"], "retrieved_contexts": r["sources"], "response": r["response"],
              **({"reference": r["reference"]} if "reference" in r else {}),
              "id": r["id"], "metadata": r["metadata"]} for r in ROWS]
    assert_items(load_items(write_jsonl(tmp_path / "ragas.jsonl", ragas)))
    assert_items(items_from_frame(pd.DataFrame(ragas)))


def test_deepeval_field_names(tmp_path):
    deepeval = [{"input": r["query"], "retrieval_context": r["sources"], "actual_output": r["response"],
                 **({"expected_output": r["reference"]} if "reference" in r else {}),
                 "context": ["ignored: the ideal context, not the retrieved one"],
                 "id": r["id"], "metadata": r["metadata"]} for r in ROWS]
    assert_items(load_items(write_jsonl(tmp_path / "deepeval.jsonl", deepeval)))
    assert_items(load_items(write_csv(tmp_path / "deepeval.csv", deepeval)))


def test_unknown_fields_are_ignored_not_kept_in_metadata(tmp_path):
    rows = [dict(ROWS[0], score=0.3, extra={"a": 1})]
    [item] = load_items(write_jsonl(tmp_path / "data.jsonl", rows))
    assert item.metadata == {"split": "dev"}


def test_integer_ids_become_strings(tmp_path):
    rows = [dict(ROWS[0], id=7)]
    assert load_items(write_jsonl(tmp_path / "a.jsonl", rows))[0].id == "7"
    assert items_from_frame(pd.DataFrame(rows))[0].id == "7"


def test_stable_hash_id_when_absent(tmp_path):
    base = {"query": "Q?", "sources": ["S."], "response": "R."}
    first = load_items(write_jsonl(tmp_path / "a.jsonl", [base]))[0].id
    again = load_items(write_jsonl(tmp_path / "b.jsonl", [dict(base, id=None)]))[0].id
    from_csv = load_items(write_csv(tmp_path / "c.csv", [dict(base, id="")]))[0].id  # CSV: an empty cell is absent
    assert first == again == from_csv == Item.content_id("Q?", ("S.",), "R.")
    others = load_items(write_jsonl(tmp_path / "d.jsonl", [
        dict(base, response="R!"), dict(base, sources=["S.", "T."]), dict(base, query="Q!")]))
    assert len({first, *(i.id for i in others)}) == 4


# --- bad input: one located line per problem, all of them ---------------------------------------

def test_a_blank_id_is_refused_with_file_line_and_field_not_replaced_by_a_hash(tmp_path):
    base = {"query": "Q?", "sources": ["S."], "response": "R."}
    path = write_jsonl(tmp_path / "a.jsonl", [dict(base, id="ok"), dict(base, id="   "), dict(base, id=""),
                                              dict(base, id="\u200b"), dict(base, id="\t\n")])
    with pytest.raises(InputError) as caught:
        load_items(path)
    hint = "; leave the field out for an id hashed from the content"
    assert caught.value.problems == [f"{path}:{n}: field id: {why}{hint}" for n, why in (
        (2, "empty"), (3, "empty"), (4, "empty (only invisible characters)"), (5, "empty"))]
    csv_path = write_csv(tmp_path / "c.csv", [dict(base, id="  ")])
    with pytest.raises(InputError, match=rf"{csv_path}:2: field id: empty"):
        load_items(csv_path)
    with pytest.raises(InputError, match=r"<dataframe>:row 1: field id: empty"):
        items_from_frame(pd.DataFrame([dict(base, id=" ")]))


def test_wrong_type_names_file_line_and_field(tmp_path):
    path = tmp_path / "data.jsonl"
    rows = [dict(ROWS[0], id=f"q{n}") for n in range(6)] + [dict(ROWS[1], sources="Paris.")]
    problems = problems_of(write_jsonl(path, rows))
    assert problems == [f"{path}:7: field sources: expected a list of strings, got str"]


def test_every_problem_of_a_file_is_reported(tmp_path):
    path = tmp_path / "data.jsonl"
    good = ROWS[0]
    lines = [
        json.dumps(dict(good, id="a")),                                  # 1 fine
        '{"query": "Q", "sources": ["S"], ',                              # 2 malformed JSON
        json.dumps(["not", "an", "object"]),                             # 3 not an object
        json.dumps({"id": "b", "sources": ["S"]}),                        # 4 query, response missing
        json.dumps(dict(good, id="c", query="   ", response="")),         # 5 empty texts
        json.dumps(dict(good, id="d", sources=["ok", 3, " "])),           # 6 bad source items
        json.dumps(dict(good, id="e", sources=[])),                       # 7 empty list
        json.dumps(dict(good, id="a")),                                  # 8 duplicate of line 1
        json.dumps(dict(good, id="f", query=5, reference=["x"], metadata="m")),  # 9 wrong types
        json.dumps(dict(good, id=1.5)),                                  # 10 float id
    ]
    path.write_text("\n".join(lines) + "\n")
    problems = problems_of(path)
    p = str(path)
    expected_starts = [
        f"{p}:2: malformed JSON:",
        f"{p}:3: expected a JSON object, got list",
        f"{p}:4: field query: missing",
        f"{p}:4: field response: missing",
        f"{p}:5: field query: empty",
        f"{p}:5: field response: empty",
        f"{p}:6: field sources: source 2 of 3: expected a string, got int",
        f"{p}:6: field sources: source 3 of 3: empty",
        f"{p}:7: field sources: empty list",
        f"{p}:8: field id: duplicate id 'a', first at {p}:1",
        f"{p}:9: field query: expected a string, got int",
        f"{p}:9: field reference: expected a string, got list",
        f"{p}:9: field metadata: expected an object, got str",
        f"{p}:10: field id: expected a string or an integer, got float",
    ]
    assert len(problems) == len(expected_starts), problems
    for problem, start in zip(sorted(problems), sorted(expected_starts)):
        assert problem.startswith(start), (problem, start)
    assert all("\n" not in problem for problem in problems)


def test_duplicate_content_without_ids_names_both_lines(tmp_path):
    row = {"query": "Q", "sources": ["S"], "response": "R"}
    path = write_jsonl(tmp_path / "data.jsonl", [row, dict(row, response="other"), row])
    [problem] = problems_of(path)
    assert problem.startswith(f"{path}:3: field id: duplicate id ")
    assert "content hash" in problem and problem.endswith(f"first at {path}:1")


def test_alias_and_our_name_for_one_field_is_an_error(tmp_path):
    path = write_jsonl(tmp_path / "data.jsonl", [
        dict(ROWS[0], user_input="Who?"),
        dict(ROWS[1], retrieval_context=["S"], retrieved_contexts=["T"]),
    ])
    problems = problems_of(path)
    assert problems == [
        f"{path}:1: field query: given under more than one name: 'query' and 'user_input'",
        f"{path}:2: field sources: given under more than one name: 'sources' and 'retrieved_contexts' and "
        f"'retrieval_context'",
    ]


def test_alias_names_the_field_as_written(tmp_path):
    path = write_jsonl(tmp_path / "data.jsonl", [{"input": "Q", "retrieval_context": "S",
                                                  "actual_output": "R"}])
    assert problems_of(path) == [
        f"{path}:1: field retrieval_context: expected a list of strings, got str"]


def test_non_utf8_bytes_give_line_and_byte_offset(tmp_path):
    path = tmp_path / "data.jsonl"
    first = json.dumps(ROWS[0]).encode() + b"\n"
    second = b'{"query": "caf\xe9", "sources": ["S"], "response": "R"}\n'
    path.write_bytes(first + second)
    [problem] = problems_of(path)
    column = second.index(b"\xe9")
    assert problem == (f"{path}:2: not UTF-8: byte 0xe9 at byte offset {len(first) + column} "
                       f"of the file (byte {column} of the line)")


def test_non_utf8_csv_is_reported_with_the_other_problems(tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(b'query,sources,response\n'
                     b'caf\xe9,"[""S""]",R\n'
                     b'Q,"[""S""]",\n')
    problems = problems_of(path)
    assert problems == [f"{path}:2: not UTF-8: byte 0xe9 at byte offset 26 of the file "
                        f"(byte 3 of the line)",
                        f"{path}:3: field response: missing (also accepted as actual_output)"]


def test_five_megabyte_response_is_refused_with_its_size(tmp_path):
    big = "x" * 5_000_000
    path = write_jsonl(tmp_path / "data.jsonl", [dict(ROWS[0], response=big),
                                                 dict(ROWS[1], sources=["ok", "é" * MAX_TEXT_BYTES])])
    assert problems_of(path) == [
        f"{path}:1: field response: too long: 5,000,000 bytes, the limit is 1,000,000 bytes",
        f"{path}:2: field sources: source 2 of 2: too long: 2,000,000 bytes, "
        f"the limit is 1,000,000 bytes",
    ]
    # The same text in a CSV cell is over the csv module's default cell limit: still our message.
    csv_path = write_csv(tmp_path / "data.csv", [dict(ROWS[0], response=big)])
    assert problems_of(csv_path) == [
        f"{csv_path}:2: field response: too long: 5,000,000 bytes, the limit is 1,000,000 bytes"]


def test_text_at_the_limit_is_accepted(tmp_path):
    path = write_jsonl(tmp_path / "data.jsonl", [dict(ROWS[0], response="x" * MAX_TEXT_BYTES)])
    assert len(load_items(path)[0].response) == MAX_TEXT_BYTES


def test_lone_surrogate_escape_is_reported_not_crashed_on(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"query": "Q\\ud800", "sources": ["S"], "response": "R"}\n')
    assert problems_of(path) == [
        f"{path}:1: field query: not valid Unicode (lone surrogate at character 1)"]


def test_csv_lines_count_from_the_header_and_multiline_cells(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text('id,query,sources,response\n'                 # line 1
                    'a,Q,"[""S""]","two\nlines"\n'                # lines 2-3
                    '\n'                                         # line 4, blank
                    'b,Q,S,R\n'                                  # line 5
                    'c,Q,"[""S""]",R,extra\n'                    # line 6
                    'd,Q,"[""S""]",R\n'                         # line 7, fine
                    'e,,"[""S""]",R\n')                          # line 8
    assert problems_of(path) == [
        f"{path}:5: field sources: expected a JSON list of strings, got text that is not JSON "
        f"(Expecting value at character 1)",
        f"{path}:6: 5 cells, but the header has 4 columns",
        f"{path}:8: field query: missing (also accepted as user_input, input)",
    ]


def test_csv_metadata_must_be_a_json_object(tmp_path):
    path = write_csv(tmp_path / "data.csv", [dict(ROWS[0], metadata="{oops"),
                                             dict(ROWS[1], metadata="[1]")])
    problems = problems_of(path)
    assert problems[0].startswith(f"{path}:2: field metadata: expected a JSON object, got text")
    assert problems[1] == f"{path}:3: field metadata: expected an object, got list"


def test_csv_duplicate_header_column(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text('query,sources,response,query\nQ,"[""S""]",R,Q2\n')
    assert problems_of(path) == [f"{path}:1: column 'query' appears more than once in the header"]


def test_parquet_and_frame_problems_say_row_n(tmp_path):
    frame = pd.DataFrame([ROWS[0], dict(ROWS[1], id="q1"), dict(ROWS[1], id="q3", sources=[])])
    path = tmp_path / "data.parquet"
    frame.to_parquet(path)
    for origin, problems in ((str(path), problems_of(path)), ("frame", problems_of(frame))):
        assert problems == [f"{origin}:row 2: field id: duplicate id 'q1', first at {origin}:row 1",
                            f"{origin}:row 3: field sources: empty list: at least one source is needed"]


def test_unknown_suffix_missing_file_and_directory(tmp_path):
    text = tmp_path / "data.txt"
    text.write_text("x")
    assert problems_of(text) == [
        f"{text}: unknown file type '.txt'; expected one of .jsonl, .csv, .parquet"]
    missing = tmp_path / "nope.jsonl"
    assert problems_of(missing) == [f"{missing}: no such file"]
    both = tmp_path / "nope"
    assert len(problems_of(both)) == 2
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    assert problems_of(folder)[0].startswith(f"{folder}: cannot read: ")


@pytest.mark.parametrize("name, content", [
    ("empty.jsonl", b""),
    ("blank.jsonl", b"\n  \n\r\n"),
    ("empty.csv", b""),
    ("header_only.csv", b"query,sources,response\n"),
])
def test_empty_file_has_no_items(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    assert problems_of(path) == [f"{path}: no items (the input is empty)"]


def test_empty_parquet_and_frame_have_no_items(tmp_path):
    frame = pd.DataFrame(columns=["query", "sources", "response"])
    path = tmp_path / "empty.parquet"
    frame.to_parquet(path)
    assert problems_of(path) == [f"{path}: no items (the input is empty)"]
    assert problems_of(frame) == ["frame: no items (the input is empty)"]


@pytest.mark.parametrize("name", ["junk.jsonl", "junk.csv", "junk.parquet"])
def test_garbage_bytes_raise_input_error_not_a_traceback(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(bytes(range(256)) * 20 + b'\n[[[[' * 5 + b"[" * 100_000 + b"\n" + b"9" * 5000)
    assert problems_of(path)


def test_many_problems_are_all_kept_but_the_message_is_capped(tmp_path):
    path = write_jsonl(tmp_path / "data.jsonl", [{"x": n} for n in range(200)])
    with pytest.raises(InputError) as caught:
        load_items(path)
    assert len(caught.value.problems) == 600  # query, sources, response on each of 200 lines
    assert str(caught.value).startswith("600 problem(s) in the input:\n")
    assert str(caught.value).endswith("... and 500 more")
    assert isinstance(caught.value, ValueError)


def test_parquet_struct_metadata_becomes_plain_json(tmp_path):
    path = tmp_path / "data.parquet"
    pd.DataFrame([dict(ROWS[0], metadata={"tags": ["a", "b"], "n": 3})]).to_parquet(path)
    [item] = load_items(path)
    assert item.metadata == {"tags": ["a", "b"], "n": 3}
    assert type(item.metadata["tags"]) is list  # not a numpy array: the store writes it as JSON
    json.dumps(item.metadata)


def test_frame_metadata_that_json_cannot_hold_is_reported():
    frame = pd.DataFrame([dict(ROWS[0], metadata={"when": object()})])
    [problem] = problems_of(frame)
    assert problem == "frame:row 1: field metadata: cannot be kept as JSON (object is not JSON)"


def test_nan_and_infinity_literals_are_errors_with_line_and_field(tmp_path):
    path = tmp_path / "nan.jsonl"
    good = '"query": "q", "sources": ["s"], "response": "r"'
    path.write_text("\n".join([
        '{"id": NaN, ' + good + '}',
        '{"id": "b", "reference": Infinity, ' + good + '}',
        '{"id": "c", "metadata": {"score": [1, -Infinity]}, ' + good + '}',
        '{"id": "d", "query": "q", "sources": ["s", NaN], "response": "r"}',
    ]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_items(path)
    assert info.value.problems == [
        f"{path}:1: field id: expected a string or an integer, got NaN",
        f"{path}:2: field reference: expected a string, got Infinity",
        f"{path}:3: field metadata.score[1]: NaN and Infinity are not JSON numbers",
        f"{path}:4: field sources: source 2 of 2: expected a string, got NaN",
    ]


def test_frame_metadata_nan_is_an_error():
    frame = pd.DataFrame([{"id": "a", "query": "q", "sources": ["s"], "response": "r",
                           "metadata": {"x": float("nan")}}])
    with pytest.raises(InputError, match=r"<dataframe>:row 1: field metadata.x: NaN and Infinity"):
        items_from_frame(frame)


@pytest.mark.parametrize("text", ["\u200b\u200b", " \u200d\ufeff ", "\u2060"])
def test_invisible_only_text_is_empty(tmp_path, text):
    path = write_jsonl(tmp_path / "z.jsonl", [{"id": "a", "query": text, "sources": ["s"], "response": "r"}])
    with pytest.raises(InputError) as info:
        load_items(path)
    assert info.value.problems == [f"{path}:1: field query: empty (only invisible characters)"]
