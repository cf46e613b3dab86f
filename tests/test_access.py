"""Who may do what on the hosted dashboard: roles from secrets.toml for each page and each write path,
the read-only switch failing closed, the Evaluate page's admin-listed judges (the server's key reaches
only a listed API base), refused run names, triage saves that keep the text, and delete-run."""
from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from evaluators.core.records import Run
from evaluators.dashboard import access, ui
from evaluators.judges import local_llm
from evaluators.storage import ownership, queries, store, writes
from evaluators.storage.ownership import os_user
from tests.openai_server import completion, format_aware
from tests.seed import RUNS

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
ITEM, TRIAGE, EVALUATE = "pages/2_Item.py", "pages/5_Triage.py", "pages/6_Evaluate.py"
AUTH = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "test-cookie-secret"}
ROLES = {"triagers": ["@qa.example.com"], "evaluators": ["ml@example.com"], "admins": ["Owner@Example.com"]}
PEOPLE = {"viewer": "guest@example.com", "triager": "ann@qa.example.com", "evaluator": "ml@example.com",
          "admin": "owner@example.com"}
SERVER_KEY = "sk-server-secret-0123456789"
ROW = {"id": "u1", "query": "How long is the refund window?",
       "sources": ["Refunds are accepted within 30 days.", "Offices close on holidays."],
       "response": "The refund window is 30 days."}


def app(page: str, role: str | None = None, secrets: dict[str, Any] | None = None, **params: str) -> AppTest:
    """An AppTest of one page; with a role, login is configured and that role's person is logged in."""
    at = AppTest.from_file(APP, default_timeout=60)
    if role is not None:
        at.secrets["auth"] = AUTH
        at.secrets["roles"] = ROLES
        at.user = {"is_logged_in": True, "email": PEOPLE[role], "email_verified": True}
    for key, value in (secrets or {}).items():
        at.secrets[key] = value
    if page != "app.py":
        at.switch_page(page)
    for key, value in params.items():
        at.query_params[key] = value
    return at


def run(at: AppTest, timeout: float = 60) -> AppTest:
    at.run(timeout=timeout)
    assert not at.exception, [e.value for e in at.exception]
    return at


def click(at: AppTest, label: str, timeout: float = 60) -> AppTest:
    next(b for b in at.button if b.label == label).click()
    return run(at, timeout)


def texts(at: AppTest) -> str:
    kinds = ("markdown", "caption", "code", "info", "warning", "error", "success", "text", "title")
    return "\n".join(str(e.value) for kind in kinds for e in getattr(at, kind))


def notes(path: Path) -> list[tuple]:
    with store.connect(path, read_only=True) as con:
        return con.execute("SELECT run_id, item_id, note, author FROM triage ORDER BY created_at").fetchall()


def run_ids(path: Path) -> list[str]:
    return sorted(queries.runs.runs(path)["run_id"])


# ---------------------------------------------------------------- pure rules

@pytest.mark.parametrize("raw", [None, "", "0", "false", "No", " off "])
def test_read_only_documented_off_values_leave_the_server_writable(raw: str | None) -> None:
    assert access.read_only_setting(raw) == (False, None)


@pytest.mark.parametrize("raw", ["1", "true", "YES", "on"])
def test_read_only_documented_on_values(raw: str) -> None:
    assert access.read_only_setting(raw) == (True, None)


@pytest.mark.parametrize("raw", ["y", "2", "ro", "enabled", "read-only"])
def test_read_only_unknown_values_fail_closed_and_are_named(raw: str) -> None:
    assert access.read_only_setting(raw) == (True, raw)


def test_roles_match_emails_and_domains_case_insensitively_highest_wins() -> None:
    roles = {"viewers": ["x@example.com"], "triagers": ["@example.com"], "evaluators": ["EVA@example.com"],
             "admins": ["boss@other.org"]}
    assert access.role_for("eva@Example.com", roles) == access.EVALUATOR
    assert access.role_for("someone@example.com", roles) == access.TRIAGER
    assert access.role_for("x@example.com", roles) == access.TRIAGER  # the domain grants more than viewers
    assert access.role_for("boss@other.org", roles) == access.ADMIN
    assert access.role_for("boss@sub.other.org", roles) == access.VIEWER  # a domain is exact, not a suffix
    assert access.role_for("mallory@example.com.evil.org", roles) == access.VIEWER
    assert access.role_for(None, roles) == access.VIEWER


@pytest.mark.parametrize("roles", [{"admin": ["a@b.c"]}, {"admins": "a@b.c"}, {"admins": ["nobody"]},
                                   {"triagers": ["a@b@c"]}, {"evaluators": ["example.com@"]}])
def test_malformed_roles_are_refused_not_guessed(roles: dict[str, Any]) -> None:
    with pytest.raises(access.ConfigError):
        access.role_for("a@b.c", roles)


def test_current_user_login_local_read_only_and_unverified_email() -> None:
    roles = {"admins": ["boss@example.com"]}
    boss = {"email": "boss@example.com", "email_verified": True}
    # without login the one local user signs as the server's OS user: no name is asked
    assert access.current_user(None, roles, read_only=False) == access.User(None, access.ADMIN, local_name=os_user())
    assert access.current_user(None, roles, read_only=True).role == access.VIEWER
    assert access.current_user(boss, roles, read_only=False) == access.User("boss@example.com", access.ADMIN)
    assert access.current_user(boss, roles, read_only=True).role == access.VIEWER
    unverified = access.current_user({**boss, "email_verified": False}, roles, False)
    assert (unverified.email, unverified.role) == (None, access.VIEWER) and "not verified" in unverified.notice
    # a name is not an identity: it never grants a role
    assert access.current_user({"name": "boss@example.com", "email_verified": True}, roles, False).role == access.VIEWER


@pytest.mark.parametrize("claimed", ["false", "False", 0, "no", "true", "True", 1, "yes", None, [True]])
def test_email_verified_other_than_the_json_true_grants_no_role(claimed: Any) -> None:
    user = access.current_user({"email": "boss@example.com", "email_verified": claimed}, {"admins": ["boss@example.com"]},
                               read_only=False, missing_verified="trust")
    assert (user.email, user.role) == (None, access.VIEWER)
    assert f"email_verified is {claimed!r}" in user.notice


def test_a_missing_email_verified_claim_is_a_viewer_unless_the_setting_trusts_it() -> None:
    roles, claims = {"admins": ["boss@example.com"]}, {"email": "boss@example.com"}  # Entra ID sends no such claim
    default = access.current_user(claims, roles, read_only=False)
    assert (default.email, default.role) == (None, access.VIEWER)
    assert "no email_verified claim" in default.notice and 'missing_email_verified = "trust"' in default.notice
    assert access.current_user(claims, roles, False, "viewer") == default
    assert access.current_user(claims, roles, False, "trust") == access.User("boss@example.com", access.ADMIN)
    for bad in ("Trust", "yes", True, ""):
        with pytest.raises(access.ConfigError, match="missing_email_verified"):
            access.current_user(claims, roles, False, bad)


@pytest.mark.parametrize("claimed", ["false", "False", 0, "no"])
def test_a_string_email_verified_shows_an_admin_no_write_control(db: Path, claimed: Any) -> None:
    at = app(EVALUATE, "admin")
    at.user = {"is_logged_in": True, "email": PEOPLE["admin"], "email_verified": claimed}
    run(at)
    assert not at.get("file_uploader") and not [b for b in at.button if b.key == "delete_run"]
    assert any("evaluator role" in i.value for i in at.info)
    assert any("not verified" in w.value for w in at.sidebar.warning)
    assert any("(no verified email)" in t.value for t in at.sidebar.text)


def test_the_secrets_setting_trusts_a_provider_that_sends_no_email_verified(db: Path) -> None:
    at = app(EVALUATE, "admin", secrets={"auth": {**AUTH, "missing_email_verified": "trust"}})
    at.user = {"is_logged_in": True, "email": PEOPLE["admin"]}
    run(at)
    assert at.get("file_uploader") and [b for b in at.button if b.key == "delete_run"]
    default = app(EVALUATE, "admin")
    default.user = {"is_logged_in": True, "email": PEOPLE["admin"]}
    run(default)
    assert not default.get("file_uploader") and any("no email_verified claim" in w.value for w in default.sidebar.warning)


def test_listed_judges_are_validated() -> None:
    good = {"label": "Team", "model": "openai/gpt-4o-mini", "api_base": "https://api.example.com/v1",
            "key_env": "TEAM_KEY"}
    assert access.listed_judges([good]) == [access.ListedJudge("Team", "openai/gpt-4o-mini",
                                                                "https://api.example.com/v1", "TEAM_KEY")]
    for bad in ({**good, "key_env": "sk-live-123"}, {**good, "api_base": "file:///etc/passwd"},
                {k: v for k, v in good.items() if k != "api_base"}, {**good, "api_key": "sk-1"},
                {**good, "label": access.OFFLINE_LABEL}):
        with pytest.raises(access.ConfigError):
            access.listed_judges([bad])
    with pytest.raises(access.ConfigError):
        access.listed_judges([good, good])


# ---------------------------------------------------------------- what each role sees

def test_viewer_sees_runs_but_no_write_controls(db: Path) -> None:
    item = run(app(ITEM, "viewer", run="weak-retriever", item="q01", tab="Triage"))
    assert item.dataframe and not [b for b in item.button if b.label == "Save triage note"]
    assert any("triager role" in i.value for i in item.info)
    assert PEOPLE["viewer"] in texts(item) and "Log out" in [b.label for b in item.sidebar.button]
    evaluate = run(app(EVALUATE, "viewer"))
    assert not evaluate.get("file_uploader") and any("evaluator role" in i.value for i in evaluate.info)
    triage = run(app(TRIAGE, "viewer"))
    assert not triage.exception


def test_triager_saves_notes_as_their_login_but_cannot_evaluate(db: Path) -> None:
    at = run(app(ITEM, "triager", run="weak-retriever", item="q02", tab="Triage"))
    assert "triage_author" not in [t.key for t in at.text_input]  # the author is the login email
    at.text_area(key="triage_note").set_value("corpus lacks the founding facts")
    click(at, "Save triage note")
    assert any("saved" in s.value for s in at.success)
    assert notes(db) == [("weak-retriever", "q02", "corpus lacks the founding facts", PEOPLE["triager"])]
    assert at.text_area(key="triage_note").value == ""  # cleared once saved
    evaluate = run(app(EVALUATE, "triager"))
    assert not evaluate.get("file_uploader")


def test_evaluator_uploads_but_cannot_delete_runs(db: Path) -> None:
    at = run(app(EVALUATE, "evaluator"))
    assert at.get("file_uploader") and at.selectbox(key="judge")
    assert not [b for b in at.button if b.key == "delete_run"]


def test_admin_deletes_a_run_from_the_evaluate_page_once_confirmed(db: Path) -> None:
    at = run(app(EVALUATE, "admin"))
    at.text_input(key="delete_run_name").set_value("weak-retriever")
    run(at)
    click(at, "Delete run")
    assert "weak-retriever" in run_ids(db) and not at.success  # nothing is deleted before the confirmation
    click(at, "Yes, delete weak-retriever")
    assert any("Deleted the run" in s.value for s in at.success)
    assert "weak-retriever" not in run_ids(db)
    at.text_input(key="delete_run_name").set_value("no-such-run")
    run(at)
    click(at, "Delete run")
    assert any("no run with this name" in e.value for e in at.error)


def test_without_login_the_local_user_has_every_role(db: Path) -> None:
    at = run(app(EVALUATE))
    assert at.get("file_uploader") and [b for b in at.button if b.key == "delete_run"]
    item = run(app(ITEM, run="weak-retriever", item="q01", tab="Triage"))
    # no login: the one local user is the server's OS user, who signs the note; no name is asked
    assert "triage_author" not in [t.key for t in item.text_input]
    assert f"Signed as {os_user()}." in [c.value for c in item.caption]
    item.text_area(key="triage_note").set_value("signed without typing")
    click(item, "Save triage note")
    assert notes(db) == [("weak-retriever", "q01", "signed without typing", os_user())]


@pytest.fixture
def nameless(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server whose OS user has no name (a container user without a passwd entry): forms ask for one."""
    monkeypatch.setattr(access.ownership, "os_user", lambda: "")


def test_malformed_roles_stop_every_page_with_the_reason(db: Path) -> None:
    at = run(app(ITEM, "admin", secrets={"roles": {"admin": ["owner@example.com"]}}, run="weak-retriever",
                 item="q01", tab="Triage"))
    assert any("malformed" in e.value and "unknown lists admin" in e.value for e in at.error)
    assert not at.dataframe and not [b for b in at.button if b.label == "Save triage note"]


@pytest.mark.parametrize("value", ["y", "2", "ro", "enabled"])
def test_unknown_read_only_value_is_read_only_with_a_notice(db: Path, monkeypatch: pytest.MonkeyPatch,
                                                            value: str) -> None:
    monkeypatch.setenv("RAG_TRIAGE_READ_ONLY", value)
    at = run(app(ITEM, run="weak-retriever", item="q01", tab="Triage"))
    assert not [b for b in at.button if b.label == "Save triage note"]
    assert any("RAG_TRIAGE_READ_ONLY" in w.value for w in at.sidebar.warning)
    assert value in [c.value for c in at.sidebar.code]
    assert not run(app(EVALUATE)).get("file_uploader")


# ---------------------------------------------------------------- the write paths refuse by themselves

def test_write_paths_refuse_roles_below_theirs(db: Path) -> None:
    viewer, triager = access.User("v@example.com", access.VIEWER), access.User("t@example.com", access.TRIAGER)
    evaluator = access.User("e@example.com", access.EVALUATOR)
    with pytest.raises(access.Refused):
        access.save_note(viewer, str(db), "weak-retriever", "q01", "confirmed", "Retriever", "n", "", 1.0)
    with pytest.raises(access.Refused):
        access.start_evaluation(triager, str(db), [], "new-run", "offline", ["sp1"], {})
    with pytest.raises(access.Refused):
        access.delete_run(evaluator, str(db), "weak-retriever")
    assert notes(db) == [] and run_ids(db) == sorted(RUNS)


def test_a_role_lost_after_the_form_was_drawn_is_refused_at_save(db: Path) -> None:
    at = run(app(ITEM, "triager", run="weak-retriever", item="q01", tab="Triage"))
    at.secrets["roles"] = {"admins": ["owner@example.com"]}  # ann is a viewer now
    at.text_area(key="triage_note").set_value("typed before the demotion")
    click(at, "Save triage note")
    assert any("may not save triage notes" in e.value for e in at.error)
    assert notes(db) == []


def test_read_only_refuses_saves_even_from_a_drawn_form(db: Path, monkeypatch: pytest.MonkeyPatch,
                                                        nameless: None) -> None:
    at = run(app(ITEM, run="weak-retriever", item="q01", tab="Triage"))
    monkeypatch.setenv("RAG_TRIAGE_READ_ONLY", "on")
    at.text_area(key="triage_note").set_value("too late")
    at.text_input(key="triage_author").set_value("someone")
    click(at, "Save triage note")
    assert notes(db) == []


# ---------------------------------------------------------------- a failed save keeps what was typed

def test_triage_save_without_a_name_keeps_the_note(db: Path, nameless: None) -> None:
    at = run(app(ITEM, run="weak-retriever", item="q01", tab="Triage"))
    at.selectbox(key="triage_label").set_value("false alarm")
    at.text_area(key="triage_note").set_value("a long careful note")
    click(at, "Save triage note")
    assert any("Enter your name" in w.value for w in at.warning)
    assert at.text_area(key="triage_note").value == "a long careful note"
    assert at.selectbox(key="triage_label").value == "false alarm"
    at.text_input(key="triage_author").set_value("reviewer-1")
    click(at, "Save triage note")
    assert notes(db) == [("weak-retriever", "q01", "a long careful note", "reviewer-1")]
    assert at.text_area(key="triage_note").value == ""


def test_triage_save_on_a_busy_database_keeps_the_note(db: Path, monkeypatch: pytest.MonkeyPatch,
                                                       nameless: None) -> None:
    at = run(app(ITEM, run="weak-retriever", item="q01", tab="Triage"))
    monkeypatch.setattr(ui, "SAVE_DEADLINE_S", 0.3)
    code = ("import sys, time; from evaluators.storage import store\n"
            "with store.connect(sys.argv[1]):\n    print('locked', flush=True); time.sleep(30)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(db)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        at.text_area(key="triage_note").set_value("worth keeping")
        at.text_input(key="triage_author").set_value("reviewer-2")
        click(at, "Save triage note")
        assert any("busy" in w.value for w in at.warning)
        assert at.text_area(key="triage_note").value == "worth keeping"
        assert at.text_input(key="triage_author").value == "reviewer-2"
    finally:
        holder.terminate()
        holder.wait(timeout=20)


# ---------------------------------------------------------------- Evaluate: names and judges

def upload(at: AppTest, rows: list[dict[str, Any]], name: str) -> AppTest:
    at.file_uploader(key="upload").set_value(("items.jsonl", "\n".join(map(json.dumps, rows)).encode(),
                                              "text/plain"))
    run(at)
    at.multiselect(key="eval_metrics").set_value(["sp1"])
    at.text_input(key="run_name").set_value(name)
    return at


def test_evaluate_refuses_an_existing_run_name(db: Path) -> None:
    before = store.query(db, "SELECT count(*) AS n FROM items WHERE run_id = 'llm-judge'")["n"].iloc[0]
    at = upload(run(app(EVALUATE)), [ROW], "llm-judge")
    click(at, "Evaluate")
    assert any("already has a run named 'llm-judge'" in e.value and "Run name" in e.value for e in at.error)
    after = store.query(db, "SELECT count(*) AS n, max(n_items) AS total FROM items JOIN runs USING (run_id) "
                            "WHERE run_id = 'llm-judge'")
    assert after["n"].iloc[0] == before and after["total"].iloc[0] == before  # nothing appended: no "9/1 items"


@pytest.mark.parametrize("name", ["weak-retriever\u200b", "llm\u2060judge", "tab\tname", "nbsp\u00a0name"])
def test_evaluate_refuses_a_run_name_that_does_not_show_as_itself(db: Path, name: str) -> None:
    at = run(upload(run(app(EVALUATE)), [ROW], name))
    assert any("Run name" in e.value and "invisible or control character" in e.value for e in at.error)
    assert next(b for b in at.button if b.label == "Evaluate").disabled
    with pytest.raises(ValueError, match="run name must hold no invisible"):  # the write path refuses by itself
        access.start_evaluation(access.User(None, access.ADMIN), str(db), [], name, "offline", ["sp1"], {})
    assert run_ids(db) == sorted(RUNS)


def test_the_judge_picker_offers_only_listed_judges_and_no_address_input(db: Path) -> None:
    judges = [{"label": "Team judge", "model": "openai/test-judge", "api_base": "http://127.0.0.1:9/v1",
               "key_env": "OPENAI_API_KEY"}]
    at = app(EVALUATE, "evaluator", secrets={"judges": judges})
    at.query_params["api_base"] = "http://attacker.example/v1"  # URL values are no way in either
    at.query_params["judge"] = "openai/evil"
    run(at)
    expected = [access.OFFLINE_LABEL, *([access.LOCAL_LABEL] if local_llm.available() is None else []), "Team judge"]
    assert at.selectbox(key="judge").options == expected
    # no model, address or key field: the two text boxes name a new run and an uploaded run file's run
    assert [t.key for t in at.text_input] == ["run_name", "run_file_as"]
    assert at.selectbox(key="judge").value == access.OFFLINE_LABEL


class Recorder:
    """A loopback OpenAI-protocol server that records where requests went and what key they carried."""

    def __init__(self) -> None:
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                seen.append((self.path, self.headers.get("Authorization")))
                data = json.dumps(completion(body, format_aware(body))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.close()


def test_a_listed_judge_key_reaches_only_its_listed_api_base(db: Path, recorder: Recorder,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    judges = [{"label": "Team judge", "model": "openai/test-judge", "api_base": recorder.base,
               "key_env": "OPENAI_API_KEY"}]
    at = upload(run(app(EVALUATE, "evaluator", secrets={"judges": judges})), [ROW], "listed-judge")
    at.selectbox(key="judge").set_value("Team judge")
    click(at, "Evaluate", timeout=120)
    assert any("finished" in s.value for s in at.success), texts(at)
    assert recorder.seen and {auth for _, auth in recorder.seen} == {f"Bearer {SERVER_KEY}"}
    assert {path for path, _ in recorder.seen} == {"/v1/chat/completions"}
    assert SERVER_KEY not in texts(at)
    row = store.query(db, "SELECT judge, started_by FROM runs WHERE run_id = 'listed-judge'").iloc[0]
    assert (row["judge"], row["started_by"]) == ("openai/test-judge", PEOPLE["evaluator"])
    with store.connect(db, read_only=True) as con:  # the key is nowhere in the database either
        stored = con.execute("SELECT string_agg(messages || params || coalesce(reply, '') || error, '') "
                             "FROM judge_calls").fetchone()[0]
    assert stored and SERVER_KEY not in stored


def test_a_listed_judge_sends_its_key_env_value_and_no_provider_key(db: Path, recorder: Recorder,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The team's OpenAI key is on the server too: the self-hosted judge gets TEAM_KEY's value, only."""
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    monkeypatch.setenv("TEAM_KEY", "team-key-for-the-llama-box")
    judges = [{"label": "Llama box", "model": "openai/llama", "api_base": recorder.base, "key_env": "TEAM_KEY"}]
    at = upload(run(app(EVALUATE, "evaluator", secrets={"judges": judges})), [ROW], "team-key")
    at.selectbox(key="judge").set_value("Llama box")
    click(at, "Evaluate", timeout=120)
    assert any("finished" in s.value for s in at.success), texts(at)
    assert recorder.seen and {auth for _, auth in recorder.seen} == {"Bearer team-key-for-the-llama-box"}
    assert {path for path, _ in recorder.seen} == {"/v1/chat/completions"}


def test_a_listed_judge_that_needs_another_credential_is_refused_before_any_call(
        db: Path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_KEY", "team-key-for-azure")
    monkeypatch.delenv("AZURE_API_VERSION", raising=False)
    judges = [{"label": "Azure", "model": "azure/gpt-4o", "api_base": recorder.base, "key_env": "TEAM_KEY"}]
    at = upload(run(app(EVALUATE, "evaluator", secrets={"judges": judges})), [ROW], "azure-run")
    at.selectbox(key="judge").set_value("Azure")
    click(at, "Evaluate")
    error = [e.value for e in at.error]
    assert len(error) == 1 and "cannot run" in error[0] and "AZURE_API_VERSION" in error[0].replace("\\", "")
    assert "\n" not in error[0] and recorder.seen == []


def test_a_listed_judge_without_its_key_on_the_server_sends_nothing(db: Path, recorder: Recorder,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEAM_JUDGE_KEY", raising=False)
    judges = [{"label": "Team judge", "model": "openai/test-judge", "api_base": recorder.base,
               "key_env": "TEAM_JUDGE_KEY"}]
    at = upload(run(app(EVALUATE, "evaluator", secrets={"judges": judges})), [ROW], "keyless")
    at.selectbox(key="judge").set_value("Team judge")
    click(at, "Evaluate")
    assert any("TEAM_JUDGE_KEY is not set" in e.value.replace("\\", "") for e in at.error)  # drawn escaped
    assert recorder.seen == [] and "keyless" not in run_ids(db)


def test_runs_record_who_started_them(db: Path) -> None:
    ownership.start_run(db, Run("cli-run", "offline", {}, {}), 0)
    with ownership.started_by("lead@example.com"):
        ownership.start_run(db, Run("page-run", "offline", {}, {}), 0)
    who = dict(store.query(db, "SELECT run_id, started_by FROM runs WHERE run_id LIKE '%-run'").values.tolist())
    assert who == {"cli-run": getpass.getuser(), "page-run": "lead@example.com"}


# ---------------------------------------------------------------- delete-run

def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluators", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def counts(path: Path, run_id: str) -> dict[str, int]:
    tables = ("runs", "items", "components", "verdicts", "scores", "triage", "grammar_correctness")
    with store.connect(path, read_only=True) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id]).fetchone()[0] for t in tables}


def test_delete_run_cli_removes_every_row_of_the_run_and_nothing_else(db: Path) -> None:
    writes.add_triage(db, "weak-retriever", "q01", "confirmed", "Retriever", "doomed note", "a")
    writes.add_triage(db, "llm-judge", "q01", "confirmed", "Retriever", "kept note", "a")
    others = {r: counts(db, r) for r in RUNS if r != "weak-retriever"}
    calls = store.query(db, "SELECT count(*) AS n FROM judge_calls")["n"].iloc[0]
    assert counts(db, "weak-retriever")["verdicts"] > 0
    done = cli("delete-run", "--db", str(db), "--run", "weak-retriever")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("deleted run weak-retriever:") and "1 triage" in done.stdout
    assert set(counts(db, "weak-retriever").values()) == {0}
    assert {r: counts(db, r) for r in others} == others
    assert store.query(db, "SELECT count(*) AS n FROM judge_calls")["n"].iloc[0] == calls  # the shared cache stays


def test_delete_run_cli_exit_codes(db: Path, tmp_path: Path) -> None:
    missing_run = cli("delete-run", "--db", str(db), "--run", "nope")
    assert missing_run.returncode == 2 and "no run named 'nope'" in missing_run.stderr
    assert "Traceback" not in missing_run.stderr
    missing_db = cli("delete-run", "--db", str(tmp_path / "absent.duckdb"), "--run", "x")
    assert missing_db.returncode == 2 and "no such database file" in missing_db.stderr
    assert not (tmp_path / "absent.duckdb").exists()
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    assert cli("delete-run", "--db", str(other), "--run", "x").returncode == 2
    assert run_ids(db) == sorted(RUNS)


def test_delete_run_is_one_transaction(db: Path) -> None:
    """A delete that fails part-way (here: a foreign key on a later table) leaves every row in place."""
    with store.connect(db) as con:
        con.execute("CREATE TABLE zz_parent (run_id VARCHAR PRIMARY KEY)")
        con.execute("CREATE TABLE zzz_child (run_id VARCHAR REFERENCES zz_parent (run_id))")
        con.execute("INSERT INTO zz_parent VALUES ('weak-retriever'); INSERT INTO zzz_child VALUES ('weak-retriever')")
    before = counts(db, "weak-retriever")
    with pytest.raises(duckdb.ConstraintException):
        writes.delete_run(db, "weak-retriever")
    assert counts(db, "weak-retriever") == before and before["items"] > 0


def test_delete_run_gives_up_on_a_busy_database(db: Path) -> None:
    with store.connect(db):  # this process holds the read-write lock...
        code = "import sys; from evaluators.storage import writes; writes.delete_run(sys.argv[1], 'llm-judge', deadline_s=0.5)"
        other = subprocess.run([sys.executable, "-c", code, str(db)], cwd=ROOT, capture_output=True, text=True)
    assert other.returncode != 0 and "StoreBusy" in other.stderr
    assert "llm-judge" in run_ids(db)
