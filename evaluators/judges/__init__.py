"""The judges: the LLM judge (the only litellm importer), the offline judge, the local LLM, cascades, prompts."""
