"""The judges' registry: per prompt file in prompts/, what the judges know about it, as plain tables.

- PARSERS: the reply parser of every prompt file in prompts/, for the LLM judge;
- OFFLINE_ANSWERS: the offline judge's answer to each prompt it can answer;
- BATCH_ELEMENTS and EVALUATED_TEXTS: which variables the offline judge checks it can read;
- BINARY_PROMPTS, LABEL_PROMPTS and DISTRIBUTION_PROMPTS: prompts a logprob judge reads from the first token.

This module imports the modules that define those functions (evidence.py for THELMA's prompts,
peers/ for the others'); nothing registers itself anywhere, so any judge answers any prompt listed
here whatever was imported first. Adding a prompt means a file in prompts/, a parser here, and (for
the offline judge) an offline answer here. The metrics are listed by id in evaluators/metrics/registry.py.
"""

from __future__ import annotations

from typing import Any, Callable

from evaluators.core.records import Answer
from evaluators.judges import evidence, prompts
from evaluators.judges.peers import deepeval, grammar, nvidia, ragas

# The most items a decomposition may list, as its prompt states: a reply past it (a small model looping over
# the same statement) is re-asked, not read. A WikiEval answer gives 3-8 statements, a source 10-25 claims.
STATEMENTS_CAP = 12
CLAIMS_CAP = 30

PARSERS: dict[str, Callable[[str], Any]] = {
    # THELMA (Appendix B), one component per call and batched
    "claims": prompts.ListParser(CLAIMS_CAP),
    "subquestions": prompts.ListParser(8),
    "essential": prompts.parse_essential,
    "source_essential": prompts.parse_binary,
    "groundedness": prompts.parse_binary,
    "source_answers": prompts.parse_binary,
    "response_addresses": prompts.parse_binary,
    "claims_batch": prompts.parse_claims_batch,
    "essential_batch": prompts.parse_essential_batch,
    "source_essential_batch": prompts.parse_binary_batch,
    "groundedness_batch": prompts.parse_binary_batch,
    "source_answers_batch": prompts.parse_coverage_batch,
    "response_addresses_batch": prompts.parse_binary_batch,
    # RAGAS
    "ragas_statements": prompts.ListParser(STATEMENTS_CAP),
    "ragas_faithfulness": ragas.parse_faithfulness,
    "ragas_questions": prompts.ListParser(3),
    "ragas_context_sentences": ragas.parse_extracted,
    # Nvidia
    "nv_answer_accuracy_1": nvidia.parse_accuracy,
    "nv_answer_accuracy_2": nvidia.parse_accuracy,
    "nv_context_relevance_1": nvidia.parse_rating,
    "nv_context_relevance_2": nvidia.parse_rating,
    "nv_groundedness_1": nvidia.parse_rating,
    "nv_groundedness_2": nvidia.parse_rating,
    # DeepEval
    "de_statements": prompts.ListParser(STATEMENTS_CAP),
    "de_answer_relevancy": deepeval.parse_not_contradicted,
    "de_faithfulness": deepeval.parse_not_contradicted,
    "de_hallucination": deepeval.parse_contradicts,
    "de_contextual_precision": deepeval.parse_yes_no,
    "de_contextual_recall": deepeval.parse_yes_no,
    "de_contextual_relevancy": deepeval.parse_labelled,
    "de_geval_steps": prompts.ListParser(4),
    "de_geval_score": deepeval.parse_geval_score,
    # GRAMMAR
    "grammar_sql_templates": prompts.parse_list,
    "grammar_text_templates": prompts.parse_list,
    "grammar_correctness": grammar.parse_correctness,
    "grammar_rag_answer": grammar.parse_answer,
}

# GRAMMAR's template prompts have no offline answer: writing SQL needs an LLM.
OFFLINE_ANSWERS: dict[str, Callable[..., Answer]] = {
    # THELMA
    "claims": evidence.offline_claims,
    "claims_batch": evidence.offline_claims_batch,
    "subquestions": evidence.offline_subquestions,
    "essential": evidence.offline_essential,
    "essential_batch": evidence.offline_essential_batch,
    "source_essential": evidence.offline_source_essential,
    "source_essential_batch": evidence.offline_source_essential_batch,
    "groundedness": evidence.offline_groundedness,
    "groundedness_batch": evidence.offline_groundedness_batch,
    "source_answers": evidence.offline_source_answers,
    "source_answers_batch": evidence.offline_source_answers_batch,
    "response_addresses": evidence.offline_response_addresses,
    "response_addresses_batch": evidence.offline_response_addresses_batch,
    # RAGAS
    "ragas_statements": ragas.offline_statements,
    "ragas_faithfulness": ragas.offline_faithfulness,
    "ragas_questions": ragas.offline_questions,
    "ragas_context_sentences": ragas.offline_context_sentences,
    # Nvidia: template 2 takes the same variables, so the same rule answers it
    "nv_answer_accuracy_1": nvidia.offline_accuracy,
    "nv_answer_accuracy_2": nvidia.offline_accuracy,
    "nv_context_relevance_1": nvidia.offline_context_relevance,
    "nv_context_relevance_2": nvidia.offline_context_relevance,
    "nv_groundedness_1": nvidia.offline_groundedness,
    "nv_groundedness_2": nvidia.offline_groundedness,
    # DeepEval
    "de_statements": deepeval.offline_statements,
    "de_answer_relevancy": deepeval.offline_answer_relevancy,
    "de_faithfulness": deepeval.offline_faithfulness,
    "de_hallucination": deepeval.offline_hallucination,
    "de_contextual_precision": deepeval.offline_contextual_precision,
    "de_contextual_recall": deepeval.offline_contextual_recall,
    "de_contextual_relevancy": deepeval.offline_contextual_relevancy,
    "de_geval_steps": deepeval.offline_geval_steps,
    "de_geval_score": deepeval.offline_geval_score,
    # GRAMMAR
    "grammar_correctness": grammar.offline_correctness,
    "grammar_rag_answer": grammar.offline_answer,
}

# Batched prompts whose answer is keyed by element number: the list variable those numbers count.
# The offline judge marks an element it cannot read (another language) as not applicable, alone.
# source_answers_batch's keys are (question number, source number or "all").
BATCH_ELEMENTS: dict[str, str] = {
    "claims_batch": "texts",
    "essential_batch": "facts",
    "source_essential_batch": "sources",
    "groundedness_batch": "claims",
    "response_addresses_batch": "questions",
    "source_answers_batch": "questions",
    "ragas_faithfulness": "claims",
    "de_answer_relevancy": "claims",
    "de_faithfulness": "claims",
    "de_contextual_recall": "claims",
    "de_contextual_precision": "sources",
    "de_hallucination": "sources",
}
# The variables that carry evaluated text (the others, such as G-Eval's criteria, are ours).
EVALUATED_TEXTS: frozenset[str] = frozenset(
    {
        "input",
        "texts",
        "query",
        "question",
        "questions",
        "source",
        "sources",
        "response",
        "reference",
        "claim",
        "claims",
        "facts",
        "given_response",
        "true_answer",
    }
)

# Prompts whose answer is a single 0/1 token: a logprob judge (the local one) reads P("1") from it.
BINARY_PROMPTS: frozenset[str] = frozenset({"source_essential", "groundedness", "source_answers", "response_addresses"})
# Prompts whose answer is one of two words (the 1 first): a logprob judge reads P(1) from the first
# token too, counting each candidate token for the word it begins ("Ess" for Essential, "Ex" for
# Extraneous). One token instead of a generated label, and a probability the band can call unsure.
LABEL_PROMPTS: dict[str, tuple[str, str]] = {"essential": ("Essential", "Extraneous")}
# Prompts whose answer is one token of a scale (G-Eval's 1-5): a logprob judge returns the whole
# first-token distribution {token: logprob}, and the metric weights the scale by it.
DISTRIBUTION_PROMPTS: frozenset[str] = frozenset({"de_geval_score"})

# Prompts whose reply is several numbered blocks (<output id="N">): a judge that begins replies with
# "<output>" for the model (LLMJudge.prefill_output) leaves these alone.
NUMBERED_BLOCKS: frozenset[str] = frozenset({"claims_batch"})

# The reply's token bound per prompt: (tokens for the reply, tokens more for each element of a batched
# prompt's list, BATCH_ELEMENTS). Each fits the longest reply the prompt asks for (a rating is ~6 tokens,
# a verdict line with its brief reason ~25, a statement ~20) with room to spare, so a model that loops
# stops there instead of at the server's own cap, and a reply cut at its bound is read as cut.
REPLY_TOKENS: dict[str, tuple[int, int]] = {
    "claims": (CLAIMS_CAP * 30, 0),
    "claims_batch": (0, CLAIMS_CAP * 30),
    "subquestions": (300, 0),
    **{p: (16, 0) for p in ("essential", "source_essential", "groundedness", "source_answers", "response_addresses")},
    **{
        p: (16, 8)
        for p in ("essential_batch", "source_essential_batch", "groundedness_batch", "response_addresses_batch")
    },
    "source_answers_batch": (16, 100),  # per question: a line for each source and one for all
    "ragas_statements": (STATEMENTS_CAP * 40, 0),
    "ragas_faithfulness": (16, 60),
    "ragas_questions": (150, 0),
    "ragas_context_sentences": (1000, 0),
    **{p: (16, 0) for p in PARSERS if p.startswith("nv_")},
    "de_statements": (STATEMENTS_CAP * 40, 0),
    "de_answer_relevancy": (16, 60),
    "de_faithfulness": (16, 60),
    "de_hallucination": (16, 60),
    "de_contextual_precision": (16, 80),
    "de_contextual_recall": (16, 60),
    "de_contextual_relevancy": (deepeval.DE_RELEVANCY_CAP * 40, 0),
    "de_geval_steps": (250, 0),
    "de_geval_score": (16, 0),
    "grammar_sql_templates": (800, 0),
    "grammar_text_templates": (400, 0),
    "grammar_correctness": (16, 0),
    "grammar_rag_answer": (120, 0),
}


def reply_tokens(prompt: str, variables: dict[str, Any]) -> int:
    """The reply's token bound for one request of `prompt` (REPLY_TOKENS)."""
    fixed, each = REPLY_TOKENS[prompt]
    listed = variables.get(BATCH_ELEMENTS.get(prompt, ""), ())
    return fixed + each * (len(listed) if isinstance(listed, (list, tuple)) else 1)
