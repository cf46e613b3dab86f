"""When a verdict counts as unsure: the uncertainty band on p, applied when scores are read.

A verdict whose p = P(match is 1) falls strictly inside its band is `unsure`: it is left out of the
score like a failure, never read as 0 or 1. The band is applied on read, never when judging, so a
user can move it without calling a judge again. Each way of obtaining p has its own default band;
a label-only judge gives p in {0, 1}, which no band can hold, so its verdicts are never unsure.
"""

from __future__ import annotations

from evaluators.core.records import CALIBRATED, LABEL, LOGPROB

Band = tuple[float, float]  # (lo, hi): lo < p < hi is unsure

DEFAULT_BANDS: dict[str, Band] = {
    # Chosen on the development split (python -m benchmarks.calibration --split dev): the widest band that
    # leaves at most 30% of the support verdicts unsure on people-labelled claims. At (0.4, 0.6) WiCE, LFQA and
    # Factcheck-GPT dev are 12%, 23% and 25% unsure, and 80%, 85% and 82% of the rest agree with people;
    # (0.35, 0.65) leaves 26%, 41% and 44% unsure for 83%, 90% and 86%.
    CALIBRATED: (0.4, 0.6),
    # The local judge's calibrated p (judges/local_calibration.json, which records it): the widest band that leaves
    # at most 30% of its sampled development matches unsure, out of fold: 25% of them, and 0.87 of the rest right.
    LOGPROB: (0.4, 0.6),
    LABEL: (0.5, 0.5),
}


def band_for(kind: str | None, band: Band | None = None) -> Band:
    """The band that applies to a verdict whose p was obtained this way; `band` overrides the default.

    A label, no kind, or a kind this version does not know (a file from elsewhere) is never unsure:
    nothing says what its p means.
    """
    if kind not in DEFAULT_BANDS or kind == LABEL:
        return DEFAULT_BANDS[LABEL]
    return band if band is not None else DEFAULT_BANDS[kind]


def is_unsure(p: float | None, kind: str | None, band: Band | None = None) -> bool:
    """True when p lies strictly inside the band for its kind (a verdict without p is never unsure)."""
    if p is None:
        return False
    lo, hi = band_for(kind, band)
    return lo < p < hi


def format_band(band: Band) -> str:
    """A band as 'LO,HI', the form parse_band() reads (the dashboard's URL, the CLI's --band)."""
    return f"{band[0]:g},{band[1]:g}"


def parse_band(text: str) -> Band:
    """Parse 'LO,HI' (e.g. '0.3,0.7') into a band, with 0 <= LO <= 0.5 <= HI <= 1."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2:
        raise ValueError(f"band must be LO,HI (e.g. 0.3,0.7), got {text!r}")
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"band must be two numbers LO,HI, got {text!r}") from None
    if not 0.0 <= lo <= 0.5 <= hi <= 1.0:  # also refuses nan
        raise ValueError(f"band must satisfy 0 <= LO <= 0.5 <= HI <= 1, got {text!r}")
    return lo, hi
