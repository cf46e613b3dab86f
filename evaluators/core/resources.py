"""Where the files read at run time are: app.py, pages/, prompts/, .streamlit/config.toml and data/grammar/.

In a checkout they sit at the top level, beside evaluators/. An installed package (pyproject.toml) ships
them inside it, as evaluators/_site/, so `rag-triage serve` and the judges find them outside a checkout.
Streamlit runs app.py and its pages from files on disk, so these are plain paths, not importlib readers.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # evaluators/
SHIPPED = PACKAGE / "_site"  # pyproject.toml's [tool.setuptools.package-dir] puts them here


def checkout() -> Path | None:
    """The checkout's top level, or None when the package runs installed."""
    return None if SHIPPED.is_dir() else PACKAGE.parent


def resource(*parts: str) -> Path:
    """The path of a file or folder read at run time, e.g. resource("prompts"), in a checkout or installed."""
    return (checkout() or SHIPPED).joinpath(*parts)
