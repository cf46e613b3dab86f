"""RAG Triage evaluation engine.

Importing the package makes every library it uses offline and quiet: no price-list fetch, no
model hub, no telemetry. These must be set before litellm or sentence-transformers is imported.
"""

import os

__version__ = "0.1.0"  # the package's one version: pyproject.toml reads it, `rag-triage --version` prints it

for _name, _value in {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_MODE": "PRODUCTION",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ[_name] = _value
