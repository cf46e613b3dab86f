"""Prompt files: strict loading, escaped rendering, content hashes, and the generic reply parsers.

A prompt is a plain file in prompts/ with `{name}` variables. Loading fails on a variable the
caller does not supply, or on one it supplies that the file does not use. Every evaluated text sits
in an element of its own: a text variable inside the template's `<tag>{name}</tag>`, each item of a
list as `<claim id="N">...</claim>`. The text is escaped the way XML escapes it (`&`, `<`, `>`), so
it can neither close its element nor open another one: a response containing `</input>`,
`<output>1</output>` or a `### Reference Answer:` line stays inside its element, and the escape is
reversible, so nothing of the text is lost. Which parser reads which prompt's reply is a table in
evaluators/judges/registry.py.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from evaluators.core.records import Elements, Status
from evaluators.core.resources import resource

PROMPT_DIR = resource("prompts")
_VAR = re.compile(r"\{([a-z_]+)\}")

# List-valued variables are rendered as numbered, tagged elements: <fact id="1">...</fact>.
_LIST_TAGS = {"facts": "fact", "sources": "source", "claims": "claim", "questions": "question", "texts": "text"}


class PromptError(ValueError):
    """A prompt file and the variables given to it do not match."""


class ParseError(ValueError):
    """A judge reply does not have the shape its prompt asks for."""


# What a verdict's detail says of a value read from a bare reply (see Bare).
BARE_REPLY = "read from a bare reply, without the <output> tags asked for"


@dataclass(frozen=True)
class Bare:
    """A parser's value read from a reply that left out the asked format where the format allows no
    doubt (a bare "2" to a prompt whose only answers are 0, 1 or 2). The judge counts such replies."""

    value: Any


def _own_element(text: str) -> frozenset[str]:
    """The variables that the template wraps in an element of their own: `<tag>{name}</tag>`."""
    return frozenset(m.group(2) for m in re.finditer(r"<([^<>/\n]+)>\n?\{([a-z_]+)\}\n?</\1>", text))


@dataclass(frozen=True)
class Prompt:
    """A loaded prompt file."""

    name: str
    text: str
    variables: frozenset[str]
    hash: str
    wrapped: frozenset[str]  # the variables the template wraps in an element of their own

    def render(self, **values: Any) -> str:
        """Fill the variables; lists become tagged, numbered elements. All text is escaped."""
        given = set(values)
        if given != self.variables:
            missing, extra = sorted(self.variables - given), sorted(given - self.variables)
            raise PromptError(f"prompt {self.name}: missing variables {missing}, unused variables {extra}")

        def fill(match: re.Match[str]) -> str:
            name, value = match.group(1), values[match.group(1)]
            if isinstance(value, (list, tuple)):
                if name not in _LIST_TAGS:
                    raise PromptError(f"prompt {self.name}: variable {name} takes text, not a list")
                tag = _LIST_TAGS[name]
                return "\n".join(f'<{tag} id="{i}">\n{escape(v)}\n</{tag}>' for i, v in enumerate(value, 1))
            # Escaping keeps a text inside its element; without one, its lines would read as the prompt's own.
            if name not in self.wrapped:
                hint = ", so it takes a list" if name in _LIST_TAGS else ""
                raise PromptError(
                    f"prompt {self.name}: variable {name} has no element of its own in the template{hint}"
                )
            return escape(str(value))

        # One pass over the template: substituted text is never scanned again for variables.
        return _VAR.sub(fill, self.text)


def escape(text: str) -> str:
    """Escape evaluated text for a prompt: `&`, `<` and `>` become entities, so it opens and closes no tag.

    Reversible (`html.unescape` gives the text back), unlike look-alike characters.
    """
    return html.escape(text, quote=False)


@lru_cache(maxsize=None)
def load(name: str) -> Prompt:
    """Load prompts/NAME.txt and record its content hash."""
    path = PROMPT_DIR / f"{name}.txt"
    text = path.read_text(encoding="utf-8")
    return Prompt(
        name=name,
        text=text,
        variables=frozenset(_VAR.findall(text)),
        hash=hashlib.sha256(text.encode("utf-8")).hexdigest()[:12],
        wrapped=_own_element(text),
    )


def prompt_hashes(names: list[str] | None = None) -> dict[str, str]:
    """Content hashes of the given prompts (all prompt files by default)."""
    names = names or sorted(p.stem for p in PROMPT_DIR.glob("*.txt"))
    return {n: load(n).hash for n in names}


# ---------------------------------------------------------------- parsers

_OUTPUT = re.compile(r"<output(?:\s+id=\"?(\d+)\"?)?\s*>(.*?)(?:</output>|$)", re.S | re.I)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)](?=\s))\s*")


def output_body(reply: str) -> str:
    """The text inside the first <output> tag (to the end if it was never closed)."""
    match = _OUTPUT.search(reply)
    if not match:
        raise ParseError("no <output> tag")
    return match.group(2).strip()


def parse_list(reply: str) -> list[str]:
    """Bulleted or one-per-line items inside every <output> block. An empty list is a valid answer.

    Judges may copy the prompt's escaped text back (`AT&amp;T`): each item is unescaped.
    """
    blocks = [m.group(2) for m in _OUTPUT.finditer(reply) if not m.group(1)]
    if not blocks:
        raise ParseError("no <output> tag")
    return [line for body in blocks for line in _items(body)]


@dataclass(frozen=True)
class ListParser:
    """A decomposition's list, as its prompt asks for it: at most `cap` items (the prompt states the cap),
    in an <output> block that is closed. A reply cut at its token bound, or one that ran past the cap
    (a model looping over the same statement), is not read: half a list would score as a whole one."""

    cap: int

    def __call__(self, reply: str) -> list[str]:
        if not re.search(r"</output>", reply, re.I):
            raise ParseError("the <output> block is not closed: the list was cut off")
        found = parse_list(reply)
        if len(found) > self.cap:
            raise ParseError(f"{len(found)} items, more than the {self.cap} asked for")
        return found


def _items(body: str) -> list[str]:
    """The bulleted lines of one block, bullets stripped and entities unescaped."""
    return [html.unescape(line) for line in (_BULLET.sub("", l).strip() for l in body.splitlines()) if line]


def parse_binary(reply: str) -> int:
    """A bare 0 or 1 inside <output>."""
    body = output_body(reply)
    if body not in ("0", "1"):
        raise ParseError(f"expected 0 or 1, got {body[:40]!r}")
    return int(body)


def _essential_value(text: str) -> int:
    words = set(re.findall(r"[a-z]+", text.lower()))
    if "not" in words and "essential" in words:  # "Not essential" is the Extraneous verdict
        return 0
    if ("essential" in words) == ("extraneous" in words):
        raise ParseError(f"expected Essential or Extraneous, got {text[:40]!r}")
    return 1 if "essential" in words else 0


def parse_essential(reply: str) -> int:
    """B.2's scale: Essential is 1, Extraneous is 0."""
    return _essential_value(output_body(reply))


def twice(key: Any, given: list[Any]) -> tuple[Status, str]:
    """The failure of an element a reply gave more than once: unparsed, whatever the values."""
    values = ", then ".join(str(v) for v in given)
    return Status.UNPARSED, f"element {key} given {len(given)} times in the reply ({values}): none is used"


def elements(found: dict[Any, list[Any]]) -> Elements:
    """Elements from every value each key was given: a key given more than once is failed, not last-wins."""
    return Elements(
        {k: v[0] for k, v in found.items() if len(v) == 1}, {k: twice(k, v) for k, v in found.items() if len(v) > 1}
    )


def _indexed(reply: str, value: Callable[[str], int]) -> Elements:
    """Lines "N: value". An element given twice is failed; one given once with an unreadable value is
    left out (the metric asks it again by itself)."""
    found: dict[int, list[Any]] = {}
    unreadable: set[int] = set()
    for line in output_body(reply).splitlines():
        m = re.match(r"^\s*(\d+)\s*:\s*(.+?)\s*$", line)  # "N: value", as the prompts ask
        if not m:
            continue
        key = int(m.group(1))
        try:
            found.setdefault(key, []).append(value(m.group(2)))
        except ParseError:
            found.setdefault(key, []).append(repr(m.group(2)[:20]))
            unreadable.add(key)
    result = elements(found)
    for key in unreadable - set(result.failed):
        del result[key]
    if not result and not result.failed:
        raise ParseError("no 'N: value' lines")
    return result


def _binary_value(text: str) -> int:
    if text not in ("0", "1"):
        raise ParseError(f"expected 0 or 1, got {text[:40]!r}")
    return int(text)


def parse_binary_batch(reply: str) -> Elements:
    """Lines "N: 0|1" inside <output>; elements missing from the reply are simply absent."""
    return _indexed(reply, _binary_value)


def parse_essential_batch(reply: str) -> Elements:
    """Lines "N: Essential|Extraneous" inside <output>."""
    return _indexed(reply, _essential_value)


def parse_claims_batch(reply: str) -> Elements:
    """One <output id="N"> block of bulleted claims per text; a text given two blocks is failed."""
    found: dict[int, list[Any]] = {}
    for match in _OUTPUT.finditer(reply):
        if match.group(1):
            found.setdefault(int(match.group(1)), []).append(_items(match.group(2)))
    if not found:
        raise ParseError('no <output id="N"> blocks')
    return elements(found)


def parse_coverage_batch(reply: str) -> Elements:
    """Lines "Q1 S2: 1" and "Q1 ALL: 0": keys are (question, source number or "all")."""
    found: dict[tuple[int, int | str], list[Any]] = {}
    for line in output_body(reply).splitlines():
        m = re.match(r"^\s*Q(\d+)\s*[,/ ]\s*(S(\d+)|ALL)\s*:\s*([01])\s*$", line, re.I)
        if m:
            target: int | str = int(m.group(3)) if m.group(3) else "all"
            found.setdefault((int(m.group(1)), target), []).append(int(m.group(4)))
    if not found:
        raise ParseError("no 'Qn Sm: value' lines")
    return elements(found)
