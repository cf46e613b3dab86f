"""Who may do what on the hosted dashboard, checked where the writes happen.

Roles come from `.streamlit/secrets.toml` as lists of emails or domains (`@example.com`):

    [roles]
    triagers = ["lead@example.com", "@qa.example.com"]   # notes and labels
    evaluators = ["ml@example.com"]                       # uploads and judge runs
    admins = ["owner@example.com"]                        # delete runs

Each role can do what the roles before it can (viewer < triager < evaluator < admin); a logged-in
user whose email no list names is a viewer. Without login configured (the local default) the one
user has every role. RAG_TRIAGE_READ_ONLY makes everyone a viewer.

An email grants a role only when the provider verified it: the claim `email_verified` is the JSON
boolean true. Any other value is a viewer with a notice. Some providers (Entra ID) send no such
claim at all: `[auth] missing_email_verified = "trust"` lets their emails grant roles; the default,
"viewer", does not.

Judges for the Evaluate page are listed by an admin, each with the NAME of the environment
variable that holds its key, so no key is ever typed, shown, or sent to an address a user chose.
The judge sends that variable's value, and nothing else, to its api_base:

    [[judges]]
    label = "GPT-4o mini (team account)"
    model = "openai/gpt-4o-mini"
    api_base = "https://api.openai.com/v1"
    key_env = "OPENAI_API_KEY"

Or the judges are the model names of a litellm `model_list` file (the `--judges` format, see
judges/routes.py), where every deployment has its api_base and its `api_key: os.environ/NAME`:

    [judges]
    file = "/etc/rag-triage/judges.yaml"

This module holds no Streamlit code: dashboard/ui.py hands it the secrets and the login claims.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from evaluators.core.records import Item, Label, check_run_name
from evaluators.judges import routes
from evaluators.judges.factory import LOCAL, OFFLINE, JudgeConfig
from evaluators.judges.routes import ENV_NAME, url_problem
from evaluators.storage import ownership, queries, runfile, writes

VIEWER, TRIAGER, EVALUATOR, ADMIN = ROLES = ("viewer", "triager", "evaluator", "admin")
# The [roles] lists in secrets.toml, one per role; any other key is a typo that would grant nothing.
ROLE_LISTS = {"viewers": VIEWER, "triagers": TRIAGER, "evaluators": EVALUATOR, "admins": ADMIN}
READ_ONLY_ENV = "RAG_TRIAGE_READ_ONLY"
READ_ONLY_ON = ("1", "true", "yes", "on")
READ_ONLY_OFF = ("", "0", "false", "no", "off")
OFFLINE_LABEL = "offline (embedded, no calls)"
LOCAL_LABEL = "local (small LLM served on 127.0.0.1)"
JUDGE_FIELDS = ("label", "model", "api_base", "key_env")
# [auth] missing_email_verified: what a login without an email_verified claim is.
MISSING_VERIFIED_SETTING = "missing_email_verified"
MISSING_VERIFIED = (VIEWER, "trust")


class Refused(PermissionError):
    """The user's role does not allow this write."""


class ConfigError(ValueError):
    """secrets.toml's roles or judges are malformed: refuse rather than guess."""


def read_only_setting(raw: str | None) -> tuple[bool, str | None]:
    """Parse RAG_TRIAGE_READ_ONLY: (read-only?, the value when it is not a documented one).

    1/true/yes/on: read-only; 0/false/no/off or unset: writable. Anything else fails closed
    (read-only) and is returned, so the page can name it.
    """
    value = (raw or "").strip().lower()
    if value in READ_ONLY_ON:
        return True, None
    if value in READ_ONLY_OFF:
        return False, None
    return True, raw


def _entries(name: str, value: Any) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"[roles] {name} must be a list of emails or @domains")
    entries = [v.strip().lower() for v in value]
    bad = [v for v in entries if "@" not in v or v.count("@") > 1 or v.endswith("@")]
    if bad:
        raise ConfigError(f"[roles] {name}: {', '.join(map(repr, bad))} is neither an email nor an @domain")
    return entries


def role_for(email: str | None, roles: Mapping[str, Any]) -> str:
    """The highest role whose list names this email or its @domain; viewer when none does."""
    unknown = sorted(set(roles) - set(ROLE_LISTS))
    if unknown:
        raise ConfigError(f"[roles] has unknown lists {', '.join(unknown)}; known: {', '.join(ROLE_LISTS)}")
    lists = {ROLE_LISTS[name]: _entries(name, value) for name, value in roles.items()}
    if not email:
        return VIEWER
    email = email.strip().lower()
    domain = email[email.rfind("@") :] if "@" in email else None
    granted = [role for role, entries in lists.items() if email in entries or (domain and domain in entries)]
    return max(granted, key=ROLES.index, default=VIEWER)


@dataclass(frozen=True)
class User:
    """The person a dashboard session acts for: their login email (None without login or unverified),
    their role, why their login grants no role when it does not (shown to them), and without login the
    local user's name (the server's OS user), which signs their notes and labels."""

    email: str | None
    role: str
    notice: str = ""
    local_name: str = ""

    @property
    def signature(self) -> str:
        """Who this user's notes and labels are signed as without asking: the login email, else the local
        user's name; '' when neither is known (a form then asks for a name)."""
        return self.email or self.local_name

    def can(self, role: str) -> bool:
        """Whether this user has `role` or a higher one."""
        return ROLES.index(self.role) >= ROLES.index(role)


def current_user(
    claims: Mapping[str, Any] | None, roles: Mapping[str, Any], read_only: bool, missing_verified: Any = VIEWER
) -> User:
    """The session's user from the login claims (None: login is not configured, the local single user).

    Only an email the provider verified grants a listed role: `email_verified` is the JSON boolean
    true (not "true", not 1), or it is absent and `missing_verified` is "trust". A display name or an
    unverified address is something a user may be able to choose.
    """
    if missing_verified not in MISSING_VERIFIED:
        raise ConfigError(
            f"[auth] {MISSING_VERIFIED_SETTING} must be {' or '.join(map(repr, MISSING_VERIFIED))}, "
            f"got {missing_verified!r}"
        )
    if claims is None:  # no login: the one local user, who is the server's OS user
        return User(None, VIEWER if read_only else ADMIN, local_name=ownership.os_user())
    email = str(claims.get("email") or "").strip() or None
    verified = claims.get("email_verified")
    notice = ""
    if "email_verified" not in claims:
        if missing_verified != "trust":
            notice = (
                "Your login provider does not say your email is verified (no email_verified claim), so you "
                f'are a viewer; an admin may set [auth] {MISSING_VERIFIED_SETTING} = "trust" for it.'
            )
    elif verified is not True:
        notice = (
            f"Your login provider marks your email as not verified (email_verified is {verified!r}), "
            "so you are a viewer."
        )
    if notice:
        email = None
    return User(email, VIEWER if read_only else role_for(email, roles), notice)


def require(user: User, role: str, action: str) -> None:
    """Raise Refused unless the user has `role`."""
    if not user.can(role):
        raise Refused(
            f"You are a {user.role} and may not {action}: that needs the {role} role "
            "(ask an admin to add you to it in .streamlit/secrets.toml)."
        )


# ---------------------------------------------------------------- judges an admin lists


@dataclass(frozen=True)
class ListedJudge:
    """A judge an admin listed: a litellm model at a fixed API base, its key in a named variable."""

    label: str
    model: str
    api_base: str
    key_env: str


def listed_judges(entries: Sequence[Mapping[str, Any]]) -> list[ListedJudge]:
    """Validate secrets.toml's [[judges]] tables."""
    judges: list[ListedJudge] = []
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, Mapping):
            raise ConfigError(f"[[judges]] entry {n} must be a table with {', '.join(JUDGE_FIELDS)}")
        missing = [f for f in JUDGE_FIELDS if not isinstance(entry.get(f), str) or not entry[f].strip()]
        extra = sorted(set(entry) - set(JUDGE_FIELDS))  # e.g. an api_key: keys never go in this file
        problems = [f"missing {', '.join(missing)}"] * bool(missing) + [f"unknown {', '.join(extra)}"] * bool(extra)
        if problems:
            raise ConfigError(f"[[judges]] entry {n}: {'; '.join(problems)}")
        judge = ListedJudge(*(entry[f].strip() for f in JUDGE_FIELDS))
        problem = url_problem(judge.api_base)
        if problem:
            raise ConfigError(f"[[judges]] {judge.label!r}: api_base {problem}")
        if not ENV_NAME.fullmatch(judge.key_env):
            raise ConfigError(
                f"[[judges]] {judge.label!r}: key_env is the NAME of an environment variable, not the key itself"
            )
        judges.append(judge)
    labels = [j.label for j in judges]
    if len(set(labels)) != len(labels) or {OFFLINE_LABEL, LOCAL_LABEL} & set(labels):
        raise ConfigError("[[judges]] labels must be unique and differ from the built-in judges'")
    return judges


@dataclass(frozen=True)
class FileJudge:
    """A judge an admin listed in a judges file: one of its model names (`model`, or a chain ending in
    it), with the routes it needs."""

    label: str
    model: str
    routes: routes.Routes


def file_judges(path: Any) -> list[FileJudge]:
    """The model names of the judges file `[judges] file` names; ConfigError when the file is malformed
    or a deployment lacks its api_base or its os.environ/NAME key (a key reaches its own base only)."""
    if not isinstance(path, str) or not path.strip():
        raise ConfigError('[judges] file must be the path of a litellm model_list file: file = "judges.yaml"')
    try:
        judges = routes.load(path.strip())
    except routes.RoutesError as exc:
        raise ConfigError(f"[judges] file: {exc}") from None
    for k, d in enumerate(judges.deployments):
        if d.api_base is None or d.key_env is None:
            raise ConfigError(
                f"[judges] file: {path}: model_list[{k}] ({d.model_name}): the dashboard's judges need "
                "litellm_params.api_base and api_key: os.environ/NAME"
            )
    return [FileJudge(name, name, judges.serving(name)) for name in judges.names]


def judge_choices(
    entries: Sequence[Mapping[str, Any]] | Mapping[str, Any], local_installed: bool
) -> dict[str, str | ListedJudge | FileJudge]:
    """The Evaluate page's judge picker, label -> judge: the offline judge, `local` when its extra is
    installed, then the admin's list ([[judges]] tables, or the model names of a [judges] file). There
    is no free-text model or address."""
    choices: dict[str, str | ListedJudge | FileJudge] = {OFFLINE_LABEL: OFFLINE}
    if local_installed:
        choices[LOCAL_LABEL] = LOCAL
    if isinstance(entries, Mapping):
        unknown = sorted(set(entries) - {"file"})
        if unknown:
            raise ConfigError(f"[judges] reads file only, not {', '.join(unknown)}")
        choices.update({j.label: j for j in file_judges(entries.get("file"))})
    else:
        choices.update({j.label: j for j in listed_judges(entries)})
    return choices


def judge_config(judge: str | ListedJudge | FileJudge, environ: Mapping[str, str]) -> JudgeConfig:
    """The judge's configuration for a picked judge.

    A listed judge is called at its listed API base only, with the value of its key variable, which
    must be set on the server, as its only credential: no provider variable (OPENAI_API_KEY) is read
    for it. A judge of a file sends each deployment its own variable's value, at that deployment's
    base. The runner refuses, before any call, a model that would need another credential too.
    """
    if isinstance(judge, str):
        return JudgeConfig(judge)
    if isinstance(judge, FileJudge):
        unset = [d.key_env for d in judge.routes.deployments if d.key_env and not environ.get(d.key_env)]
        if unset:
            raise ConfigError(
                f"judge {judge.label!r} cannot run: its key variable {unset[0]} is not set on the server (ask an admin)"
            )
        return JudgeConfig(judge.model, judges=judge.routes)
    if not environ.get(judge.key_env):
        raise ConfigError(
            f"judge {judge.label!r} cannot run: its key variable {judge.key_env} is not set on "
            "the server (ask an admin)"
        )
    return JudgeConfig(judge.model, api_base=judge.api_base, key_env=judge.key_env)


# ---------------------------------------------------------------- the write paths


class RunExists(ValueError):
    """A new evaluation was given the name of a run the database already holds."""


LookAlike = ownership.LookAlike  # a new evaluation's name looks like an existing run's


def save_note(
    user: User,
    db: str,
    run_id: str,
    item_id: str,
    label: str,
    component: str,
    note: str,
    author: str,
    deadline_s: float,
) -> str:
    """Save one triage note as this user (a triager or above); returns the author recorded.

    The author is the login email, else the local user's name (User.signature), else the name typed. Raises
    Refused, ValueError
    (no name) or store.StoreBusy; the caller keeps what the user typed on any of them.
    """
    require(user, TRIAGER, "save triage notes")
    author = user.signature or author.strip()
    if not author:
        raise ValueError("Enter your name so the team knows who triaged this item.")
    writes.add_triage(db, run_id, item_id, label, component, note, author, deadline_s=deadline_s)
    return author


def save_labels(user: User, db: str, run_id: str, labels: Sequence[Label], author: str, deadline_s: float) -> str:
    """Save labels of the judge as this user (a triager or above), all or none; returns the author recorded.

    Raises Refused, ValueError (no name) or store.StoreBusy, like save_note.
    """
    require(user, TRIAGER, "label the judge's verdicts")
    author = user.signature or author.strip()
    if not author:
        raise ValueError("Enter your name so the team knows who labelled this.")
    writes.add_labels(db, run_id, [replace(label, author=author) for label in labels], deadline_s=deadline_s)
    return author


def start_evaluation(
    user: User,
    db: str,
    items: Sequence[Item],
    run: str,
    judge: str | ListedJudge | FileJudge,
    metrics: Sequence[str],
    environ: Mapping[str, str],
    on_progress: Callable[[Any], None] | None = None,
) -> Any:
    """Evaluate items into a NEW run as this user (an evaluator or above); returns the runner's summary.

    Refuses a name that does not show as itself (records.run_name_problem) or of an existing run (a new
    upload would otherwise be appended to that run), and records the user as the one who started the
    run. ConfigError (one line, before any call): a listed judge's key is not set, or its model would
    need another credential than that key.
    """
    require(user, EVALUATOR, "upload files or run judges")
    check_run_name(run)
    if queries.runs.run_exists(db, run):
        raise RunExists(
            "A run with this name already exists: choose another name (an evaluation never adds to an existing run)."
        )
    config = judge_config(judge, environ)
    from evaluators.judges.llm import JudgeUnavailable
    from evaluators.runs.runner import RunOptions, evaluate  # lazy: the runner's stack, only when a run starts

    options = RunOptions(config, tuple(metrics))

    with ownership.started_by(user.email or ""):
        try:
            return evaluate(items, db, run, options=options, on_progress=on_progress)
        except JudgeUnavailable as exc:  # found before any call: the listed judge is what is wrong
            raise ConfigError(f"judge {getattr(judge, 'label', judge)!r} cannot run: {exc}") from None


def import_run(user: User, db: str, file: Path, name: str | None) -> runfile.Imported:
    """Add the run of an uploaded run file as this user (an evaluator or above), recording them as the one
    who imported it; raises Refused, or what runfile.import_run raises."""
    require(user, EVALUATOR, "upload files or run judges")
    return runfile.import_run(file, db, name, imported_by=user.email or ownership.os_user(), via="upload")


def delete_run(user: User, db: str, run_id: str) -> dict[str, int]:
    """Delete a run with all its rows as this user (an admin); returns the rows deleted per table."""
    require(user, ADMIN, "delete runs")
    return writes.delete_run(db, run_id)
