"""Judges from litellm's model_list file (--judges): read and checked, replicas and fallbacks through
litellm's Router, each deployment sent its own key, and the hosted dashboard's judges from the same file.

Real loopback servers (tests/openai_server.py) and real litellm calls; the servers' request logs and
headers say where each call went and with which key, the DuckDB store says what the run recorded.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import app_db
from openai_server import OpenAIServer
from test_access import EVALUATE, ROW, SERVER_KEY, app, click, run, texts, upload
from test_pages import open_expander, open_page
from test_runner import items, write_jsonl

from evaluators import cli
from evaluators.dashboard import access
from evaluators.judges import routes
from evaluators.storage import store

GOOD = """\
model_list:
  - model_name: judge
    litellm_params:
      model: openai/test-judge
      api_base: {a}
      api_key: os.environ/KEY_A
      rpm: 6000
  - model_name: judge
    litellm_params: {{model: openai/test-judge, api_base: "{b}", api_key: os.environ/KEY_B, rpm: 6000}}
  - model_name: backup
    litellm_params: {{model: openai/test-judge, api_base: "{c}"}}
router_settings:
  fallbacks: [{{judge: [backup]}}]
  cooldown_time: 30
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "judges.yaml"
    path.write_text(text)
    return path


def evaluate(tmp_path: Path, judges: Path, run_id: str, n: int = 4, judge: str = "judge") -> tuple[int, Path]:
    db, data = tmp_path / "j.duckdb", write_jsonl(tmp_path / "items.jsonl", items(n))
    code = cli.main(["evaluate", str(data), "--db", str(db), "--run", run_id, "--judge", judge, "--judges",
                     str(judges), "--metrics", "sp1,gr", "--quiet", "--client-processes", "1"])
    return code, db


def keys(server: OpenAIServer) -> set[str | None]:
    return {h.get("authorization") for h in server.headers}


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)  # the provider's key is on the machine: it must go nowhere
    monkeypatch.setenv("KEY_A", "key-for-a")
    monkeypatch.setenv("KEY_B", "key-for-b")


BAD = [
    # (file text, line, field, what the message says)
    ("model_list:\n  - model_name: j\n    litellm_params:\n      api_base: http://127.0.0.1:9/v1\n",
     3, "model_list[0].litellm_params.model", "must be a name"),
    ("model_list:\n  - model_name: j\n    litellm_params:\n      model: openai/x\n      api_key: sk-live-123\n",
     5, "model_list[0].litellm_params.api_key", "must be os.environ/NAME"),
    ("model_list:\n  - model_name: j\n    litellm_params: {model: openai/x, api_base: 'ftp://host/v1'}\n",
     3, "model_list[0].litellm_params.api_base", "http(s) URL"),
    ("model_list:\n  - model_name: j\n    litellm_params: {model: openai/x, rpm: -5}\n",
     3, "model_list[0].litellm_params.rpm", "0 or more"),
    ("model_list:\n  - model_name: j\n    litellm_params: {model: openai/x}\nrouter_settings:\n"
     "  fallbacks:\n    - {j: [nope]}\n", 6, "router_settings.fallbacks[0]", "names 'nope', which is no model_name"),
    ("model_list:\n  - model_name: j\n    litellm_params: {model: openai/x}\nrouter_settings:\n"
     "  cooldown: 3\n", 5, "router_settings.cooldown", "is a field this file does not read"),
    # Fields litellm reads but this file never does: refused, not kept in silence.
    ("model_list:\n  - model_name: j\n    litellm_params: {model: openai/x}\n    model_info:\n"
     "      api_key: sk-live-123\n", 4, "model_list[0].model_info", "is a field this file does not read"),
    # The CLI's name for its built-in judge: it would replace the file's model in silence.
    ("model_list:\n  - model_name: offline\n    litellm_params: {model: openai/x}\n", 2,
     "model_list[0].model_name", "must not be 'offline'"),
    # A provider litellm sends to its own host whatever api_base it is given (the key would go there).
    ("model_list:\n  - model_name: j\n    litellm_params: {model: replicate/x, api_base: 'http://127.0.0.1:9/v1', "
     "api_key: os.environ/KEY_A}\n", 3, "model_list[0].litellm_params.model", "cannot be given an api_base"),
    ("model_list:\n  - model_name: j\n    litellm_params: {model: openai/x\n", 4, None, "not YAML"),
]


@pytest.mark.parametrize("text,line,field,says", BAD)
def test_a_malformed_judges_file_is_refused_in_one_line_naming_file_line_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: int, field: str | None,
        says: str) -> None:
    path = write(tmp_path, text)
    code, db = evaluate(tmp_path, path, "bad", judge="j")
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and not db.exists(), err
    assert f"{path}:{line}: " in err and says in err and (field is None or f" {field} " in err), err
    assert "sk-live-123" not in err


def test_judge_must_name_a_model_of_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, GOOD.format(a="http://127.0.0.1:9/v1", b="http://127.0.0.1:8/v1", c="http://127.0.0.1:7/v1"))
    code, _ = evaluate(tmp_path, path, "r", judge="offline>gpt")
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--judge: no model_name 'gpt'" in err and "judge, backup" in err, err


def test_replicas_of_a_file_share_the_calls_each_with_its_own_key(tmp_path: Path) -> None:
    """Two deployments of `judge` answer: calls spread over both, A gets KEY_A's value, B KEY_B's and the
    fallback is never asked; each call stores the endpoint that answered."""
    with OpenAIServer(latency=0.02) as a, OpenAIServer(latency=0.02) as b, OpenAIServer() as c:
        path = write(tmp_path, GOOD.format(a=a.base_url, b=b.base_url, c=c.base_url))
        code, db = evaluate(tmp_path, path, "spread", n=12)
        assert code == 0
        assert a.requests and b.requests and not c.requests
        assert keys(a) == {"Bearer key-for-a"} and keys(b) == {"Bearer key-for-b"}
        answered = {a.base_url: len(a.requests), b.base_url: len(b.requests)}
    calls = store.query(db, "SELECT endpoint, count(*) AS n FROM judge_calls GROUP BY endpoint")
    assert dict(calls.values.tolist()) == answered
    row = store.query(db, "SELECT judge FROM runs WHERE run_id = 'spread'").iloc[0]
    assert row["judge"] == "judge"


def test_when_every_replica_fails_the_fallback_model_decides_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first model's two endpoints fail every call (500, 503): litellm's Router falls back to
    `backup` on another server. Every verdict is scored, each call records the model and endpoint that
    answered, the item page shows it, and the fallback (no api_key in the file) is sent no key at all."""
    with OpenAIServer() as a, OpenAIServer() as b, OpenAIServer() as c:
        a.fail_when(lambda i, body: True, "500")
        b.fail_when(lambda i, body: True, "503")
        path = write(tmp_path, GOOD.format(a=a.base_url, b=b.base_url, c=c.base_url))
        code, db = evaluate(tmp_path, path, "fallback", n=3)
        assert code == 0
        assert a.requests and b.requests and c.requests
        assert keys(a) == {"Bearer key-for-a"} and keys(b) == {"Bearer key-for-b"} and keys(c) == {"Bearer no-key"}
        fallback = f"backup at {c.base_url}"
    statuses = store.query(db, "SELECT status, count(*) AS n FROM scores WHERE run_id = 'fallback' GROUP BY status")
    assert statuses.values.tolist() == [["ok", 3 * 2]]
    calls = store.query(db, "SELECT model, endpoint, count(*) AS n FROM judge_calls GROUP BY ALL")
    assert calls.values.tolist() == [["judge", fallback, len(c.requests)]]
    list(app_db(db, monkeypatch))
    page = open_page("pages/2_Item.py", run="fallback", item="i00", tab="Response")
    exp = open_expander(page, "GR")
    assert any("backup at" in x.value and "latency" in x.value for x in exp.caption), [x.value for x in exp.caption]


def dashboard_file(tmp_path: Path, a: str, b: str) -> Path:
    return write(tmp_path, f"""\
model_list:
  - model_name: team
    litellm_params: {{model: openai/test-judge, api_base: "{a}", api_key: os.environ/KEY_A}}
  - model_name: team
    litellm_params: {{model: openai/test-judge, api_base: "{b}", api_key: os.environ/KEY_B}}
""")


def test_the_dashboard_lists_the_judges_of_a_file_and_each_key_reaches_its_own_base(
        db: Path, tmp_path: Path) -> None:
    with OpenAIServer() as a, OpenAIServer() as b:
        secrets = {"judges": {"file": str(dashboard_file(tmp_path, a.base_url, b.base_url))}}
        at = upload(run(app(EVALUATE, "evaluator", secrets=secrets)), [ROW], "file-judge")
        assert "team" in at.selectbox(key="judge").options
        at.selectbox(key="judge").set_value("team")
        click(at, "Evaluate", timeout=120)
        assert any("finished" in s.value for s in at.success), texts(at)
        assert a.requests or b.requests
        assert keys(a) <= {"Bearer key-for-a"} and keys(b) <= {"Bearer key-for-b"}
    assert SERVER_KEY not in texts(at)
    row = store.query(db, "SELECT judge FROM runs WHERE run_id = 'file-judge'").iloc[0]
    assert row["judge"] == "team"


def test_a_dashboard_judges_file_needs_a_base_and_a_named_key_for_every_deployment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keyless = write(tmp_path, "model_list:\n  - model_name: t\n    litellm_params: {model: openai/x, "
                              "api_base: 'http://127.0.0.1:9/v1'}\n")
    with pytest.raises(access.ConfigError, match=r"model_list\[0\] \(t\): the dashboard's judges need"):
        access.judge_choices({"file": str(keyless)}, local_installed=False)
    with pytest.raises(access.ConfigError, match=r"judges\.yaml:3: model_list\[0\]\.litellm_params\.api_key"):
        write(tmp_path, "model_list:\n  - model_name: t\n    litellm_params: {model: openai/x, api_key: sk-1}\n")
        access.judge_choices({"file": str(tmp_path / "judges.yaml")}, local_installed=False)
    judge = access.judge_choices({"file": str(dashboard_file(tmp_path, "http://h:1/v1", "http://h:2/v1"))},
                                 local_installed=False)["team"]
    monkeypatch.delenv("KEY_B")
    with pytest.raises(access.ConfigError, match="its key variable KEY_B is not set"):
        access.judge_config(judge, {"KEY_A": "x"})


def test_api_base_flags_make_the_same_routes_as_a_file(tmp_path: Path) -> None:
    flags = routes.from_flags("openai/m", ["http://h:1/v1", "http://h:2/v1", "http://h:1/v1"], "TEAM_KEY")
    file = routes.load(write(tmp_path, "model_list:\n" + "".join(
        f"  - {{model_name: openai/m, litellm_params: {{model: openai/m, api_base: 'http://h:{p}/v1', "
        "api_key: os.environ/TEAM_KEY}}\n" for p in (1, 2))))
    assert flags.deployments == file.deployments and flags.fallbacks == file.fallbacks == {}


# ---------------------------------------------------------------- a judges file is input from another team

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + k)}: &{chr(98 + k)} [{', '.join(['*' + chr(97 + k)] * 9)}]\n" for k in range(8)
) + "model_list: [*i]\n"


@pytest.mark.parametrize("make,says", [
    (lambda d: write(d, ALIAS_BOMB), "once its aliases are expanded"),
    (lambda d: write(d, "model_list:\n" + "  - {model_name: j, litellm_params: {model: openai/x}}\n" * 40_000),
     "over the limit"),
    (lambda d: Path("/dev/zero"), "not a regular file"),
    (lambda d: write(d, "a: &a [*a]\nmodel_list: *a\n"), "refers to a node that holds it"),
])
def test_a_judges_file_is_read_within_bounds(tmp_path: Path, capsys: pytest.CaptureFixture[str], make, says: str
                                             ) -> None:
    """A 1 KB file of nine nested alias levels (3.4 GB and 38 s before), a 2 MB file, and a device that never ends are
    each refused in one line, before anything is built from them."""
    code, db = evaluate(tmp_path, make(tmp_path), "bounded", judge="j")
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and says in err and not db.exists(), err


def test_an_alias_within_bounds_is_still_read(tmp_path: Path) -> None:
    """A shared block of parameters written once (an anchor and its aliases) is a judges file as before."""
    file = routes.load(write(tmp_path, "model_list:\n  - model_name: j\n    litellm_params: &p {model: openai/m, "
                                       "api_base: 'http://h:1/v1'}\n  - model_name: k\n    litellm_params: *p\n"))
    assert [d.model_name for d in file.deployments] == ["j", "k"]


def test_an_api_base_given_to_a_provider_that_ignores_it_is_refused_before_any_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], openai_server: OpenAIServer) -> None:
    """replicate/ sends its calls, and the key, to api.replicate.com whatever api_base it is given."""
    db, data = tmp_path / "j.duckdb", write_jsonl(tmp_path / "items.jsonl", items(2))
    code = cli.main(["evaluate", str(data), "--db", str(db), "--run", "r", "--judge", "replicate/meta/llama",
                     "--api-base", openai_server.base_url, "--metrics", "gr", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "replicate/ calls" in err and "openai/NAME" in err, err
    assert not openai_server.requests


def test_every_provider_listed_as_honouring_an_api_base_sends_its_call_there_and_nowhere_else() -> None:
    """Through litellm itself, each listed provider's call reaches a loopback api_base, and no other host is
    looked up (benchmarks/api_base_probe.py); replicate/ and huggingface/ do not."""
    from benchmarks.api_base_probe import probe

    found = {p.provider: p for p in probe([*sorted(routes.HONOURS_API_BASE), "replicate", "huggingface"])}
    wrong = {name: p for name, p in found.items() if p.honours != (name in routes.HONOURS_API_BASE)}
    assert not wrong, wrong
