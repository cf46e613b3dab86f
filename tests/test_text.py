"""English text handling: sentences, claims, sub-questions, numbers, negation and answer types."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evaluators.core.text import (
    answer_type,
    answered_kind_words,
    has_answer_type,
    has_content,
    kind_words,
    negated,
    numbers,
    question_topic,
    refuses,
    split_claims,
    split_questions,
    split_sentences,
)

QUERY = "When was the Chimnabai Clock Tower completed, and who was it named after?"


# ---------------------------------------------------------------- splitting

def test_sentences_keep_initials_abbreviations_and_decimals_whole() -> None:
    text = ("Cillian Murphy stars as J. Robert Oppenheimer, e.g. in 2023. It cost US$4.8 billion. "
            "No date has been provided.The mission is important!")
    assert split_sentences(text) == [
        "Cillian Murphy stars as J. Robert Oppenheimer, e.g. in 2023.", "It cost US$4.8 billion.",
        "No date has been provided.", "The mission is important!"]


def test_claims_split_coordinated_verbs_and_carry_the_subject() -> None:
    assert split_claims("The tower was completed in 1896 and named after Chimnabai I.") == [
        "The tower was completed in 1896.", "The tower was named after Chimnabai I."]


def test_claims_resolve_a_leading_pronoun_and_split_a_relative_clause() -> None:
    claims = split_claims("The Chimnabai Clock Tower was completed in 1896. It was named after Chimnabai I, "
                          "who was a queen and the first wife of Sayajirao Gaekwad III.")
    assert claims == ["The Chimnabai Clock Tower was completed in 1896.",
                      "The Chimnabai Clock Tower was named after Chimnabai I.",
                      "Chimnabai I was a queen.",
                      "Chimnabai I was the first wife of Sayajirao Gaekwad III."]


def test_claims_resolve_possessives_and_drop_headings() -> None:
    claims = split_claims("PharmaCann was founded in 2014.\nHistory\nIts headquarters is in Illinois.")
    assert claims == ["PharmaCann was founded in 2014.", "PharmaCann's headquarters is in Illinois."]


def test_a_quote_closed_after_its_full_stop_stays_with_its_sentence() -> None:
    assert split_sentences('In the US it is called "hard cider." The term "cider" means juice.') == [
        'In the US it is called "hard cider."', 'The term "cider" means juice.']


def test_a_clause_cut_at_a_semicolon_starts_a_claim_but_a_quoted_semicolon_does_not_cut() -> None:
    assert split_claims("Height may decide the position; however, players of all heights excel.") == [
        "Height may decide the position.", "However, players of all heights excel."]
    assert split_claims('He wrote: "Edmund had decided it; and if she did not lead, it was never touched."') == [
        'He wrote: "Edmund had decided it; and if she did not lead, it was never touched."']


def test_a_pronoun_after_a_lead_in_sentence_refers_to_its_subject_and_it_never_to_a_plural() -> None:
    assert split_claims("Transformer models have been successful. In the context of dialogue, the DIONYSUS model is "
                        "an encoder-decoder. It is pre-trained on pseudo summaries.")[2] == (
        "The DIONYSUS model is pre-trained on pseudo summaries.")
    assert split_claims("Transformer-based models have been successful. It is widely used.")[1] == (
        "It is widely used.")


def test_claims_do_not_split_a_list_of_nouns() -> None:
    assert split_claims("The desert has gold, uranium and copper.") == ["The desert has gold, uranium and copper."]


def test_subquestions_carry_the_subject_into_later_parts() -> None:
    assert split_questions(QUERY) == ["When was the Chimnabai Clock Tower completed?",
                                      "Who was the Chimnabai Clock Tower named after?"]
    assert split_questions("When was PharmaCann founded and what is its headquarters location?") == [
        "When was PharmaCann founded?", "What is PharmaCann's headquarters location?"]


def test_subquestions_resolve_she_to_the_person_asked_about() -> None:
    assert split_questions("Who is the Managing Director of FoodFutureCo and what are her accomplishments?") == [
        "Who is the Managing Director of FoodFutureCo?",
        "What are the Managing Director of FoodFutureCo's accomplishments?"]


def test_subquestions_drop_greetings_and_statements() -> None:
    text = ("Hi there! Imagine you are a travel agent booking flights to London. "
            "What is the most effective way to book flights to London?")
    assert split_questions(text) == ["What is the most effective way to book flights to London?"]


def test_a_query_without_a_question_is_kept_whole() -> None:
    assert split_questions("Tell me about the Raopura Tower") == ["Tell me about the Raopura Tower?"]


# ---------------------------------------------------------------- markdown: claims from long-form answers

def test_list_markers_are_not_part_of_a_claim() -> None:
    text = "- The museum was opened in 1901.\n* It was rebuilt in 1950.\n\u2022 Entry is free for children."
    assert split_claims(text) == ["The museum was opened in 1901.", "The museum was rebuilt in 1950.",
                                  "Entry is free for children."]


def test_numbered_items_are_claims_without_their_numbers() -> None:
    text = "1. The Blue route takes 50 minutes.\n2) The Red route takes 35 minutes.\n(3) Both leave hourly."
    assert split_claims(text) == ["The Blue route takes 50 minutes.", "The Red route takes 35 minutes.",
                                  "Both leave hourly."]
    # Before, "1. The Blue ..." split into "1." and the sentence: the bare number was a claim of its own.
    assert split_sentences(text)[0] == "The Blue route takes 50 minutes."


def test_a_bold_lead_in_names_the_subject_of_its_text() -> None:
    text = ("1. **Parallel corpora**: These are created by aligning texts in two languages.\n"
            "2. **Data augmentation:** This involves modifying existing text.\n"
            "3. **Down payment** - Aim to put down at least 20% of the price.\n"
            "- Tensor Train decomposition: used to compress fully-connected layers.")
    assert split_claims(text) == [
        "Parallel corpora are created by aligning texts in two languages.",
        "Data augmentation involves modifying existing text.",
        "Down payment: Aim to put down at least 20% of the price.",
        "Tensor Train decomposition: used to compress fully-connected layers."]


def test_a_heading_alone_is_no_claim() -> None:
    for heading in ("# Ferries", "## The Blue route and its timetable", "**The Blue route and its timetable**",
                    "**Economic Value**:", "1. **Economic Value**"):
        assert split_claims(heading) == [] and split_sentences(heading) == [], heading
    text = "## Timetable\n**Weekday crossings on the Blue route**\nThe Blue route takes 50 minutes."
    assert split_claims(text) == ["The Blue route takes 50 minutes."]
    # A bold sentence is no heading.
    assert split_claims("**The Blue route takes 50 minutes.**") == ["The Blue route takes 50 minutes."]


def test_a_lead_in_alone_is_no_claim_and_its_items_complete_it() -> None:
    lead_in = "Additionally, some pre-training corpora may be constructed using techniques such as:"
    assert split_claims(lead_in) == [] and split_sentences(lead_in) == []
    text = f"{lead_in}\n\n1. **Data augmentation**: This involves modifying existing text data."
    assert split_claims(text) == ["Data augmentation involves modifying existing text data."]
    assert split_claims("The ferry runs on:\n- Mondays\n- Fridays and Sundays\n\nIt is often late.") == [
        "The ferry runs on: Mondays.", "The ferry runs on: Fridays and Sundays.", "It is often late."]


def test_citation_markers_and_emphasis_are_no_content() -> None:
    text = ("Pre-training uses unlabeled data [4]. Shadow models are trained[5]. Models can leak data [2][2]. "
            "Both attacks work [1, 3]. TT compresses dense layers in [1] and convolutional layers in [2].\n"
            "The **Blue** route takes `50` minutes and __costs__ *little*.\n\nReferences:\n\n"
            "[1] A. Novikov, D. Podoprikhin. Tensorizing neural networks. In NIPS, 2015.")
    assert split_claims(text) == [
        "Pre-training uses unlabeled data.", "Shadow models are trained.", "Models can leak data.",
        "Both attacks work.", "TT compresses dense layers and convolutional layers.",
        "The Blue route takes 50 minutes and costs little."]
    assert not has_content("[4]") and not has_content("[1][2], [3]")
    assert split_claims("The salt is [EMIM][TfO].") == ["The salt is [EMIM][TfO]."]  # not a citation


def test_a_numbered_fragment_is_no_claim_and_no_sentence() -> None:
    for numbered in ("1. 2. 3.", "1.\n2.\n3.", "1) 2) 3)", "- 1.\n- 2.", "**Steps:**\n1.\n2.\n3."):
        assert split_claims(numbered) == [] and split_sentences(numbered) == [], numbered
    assert not has_content("1. 2. 3.") and not has_content("1)\n2)")
    # One number alone is an answer ("How many halls?"), not a list.
    assert has_content("42.") and split_sentences("42.") == ["42."] and split_claims("42.") == ["42."]
    # "Steps: 1. Mix." keeps its words; a stray number between sentences is no sentence.
    assert split_sentences("Mix the flour. 2. Bake it.") == ["Mix the flour.", "Bake it."]


def test_citations_inside_brackets_do_not_split_a_claim() -> None:
    text = "The method is widely used (Hermann and Blunsom, 2014; Singla et al., 2018). Phang et al. (2019) agree."
    assert split_claims(text) == ["The method is widely used (Hermann and Blunsom, 2014; Singla et al., 2018).",
                                  "Phang et al. (2019) agree."]


RAGCHECKER = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "ragchecker_meta_eval" / \
    "human_labeled_data.json"
DEV_DOMAINS = {"kiwi", "clapnq", "novelqa", "robustqa/fiqa", "robustqa/lifestyle"}  # the others are held out
_HEAD_LINE = re.compile(r"^\s*(?:#.*|(?:[-*]|\d+[.)])?\s*\*\*[^*]+\*\*:?|.*:)\s*$")


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", re.sub(r"^\s*(?:#+|[-*\u2022]|\d+[.)])\s", "", text).lower()))


@pytest.mark.skipif(not RAGCHECKER.exists(), reason=f"{RAGCHECKER} is absent (the shared datasets are not here)")
def test_long_form_ragchecker_answers_give_clean_claims() -> None:
    records = [r for r in json.loads(RAGCHECKER.read_text()) if r["dataset"] in DEV_DOMAINS]
    texts = [r[m]["response"] for r in records[::2] for m in ("model1", "model2")] + [r["gt_answer"] for r in records]
    assert len(texts) > 200
    for text in texts:
        heads = {_words(line) for line in text.splitlines() if _HEAD_LINE.match(line)} - {""}
        for claim in split_claims(text):
            assert _words(claim) not in heads, (claim, "a heading or lead-in alone")
            assert not re.match(r"^\W*(?:[-*\u2022#]|\d{1,2}[.)])(?:\s|$)", claim), (claim, "a list marker")
            assert not re.search(r"\[\d+(?:\s*,\s*\d+)*\]", claim) and "**" not in claim, claim
            assert has_content(claim) and (len(claim.split()) >= 4 or claim.endswith(".")), (claim, "a fragment")
    # The kiwi answer of the issue: a numbered bold lead-in gives the claim with its subject.
    kiwi = next(r["model1"]["response"] for r in records if r["model1"]["response"].startswith(
        "Pre-training corpora for language models can be constructed in various ways"))
    claims = split_claims(kiwi)
    assert claims[0] == ("Domain-specific corpora are created by collecting text data from a specific domain, "
                         "such as Wikipedia or BookCorpus.")
    assert "Parallel corpora are created by collecting text data in multiple languages and aligning them to " \
           "create a parallel corpus." in claims


# ---------------------------------------------------------------- checks

def test_numbers_read_digits_words_scales_and_ordinals() -> None:
    assert numbers("US$4.8 billion for a 573-km line") == {4.8e9, 573.0}
    assert numbers("1,300 kilometres, two dozen stops") == {1300.0, 2.0, 12.0}
    assert numbers("the first wife") == {-1.0}  # ordinals are kept apart from counts
    assert numbers("one of the largest") == set()  # "one of" states no count


def test_negation_and_refusal_cues() -> None:
    assert negated("The shop does not open on Sundays.") and negated("It isn't open.")
    assert not negated("The shop opens on Sundays.")
    assert refuses("The launch date has not been provided.")
    assert refuses("I do not have information about the opening film.")
    assert not refuses("The launch was provided by ISRO.")


def test_how_quickly_and_what_discount_ask_for_a_number_and_a_name_after_by_is_no_place() -> None:
    """A cut answer that gives neither answers "How quickly is the refund paid?" or "What discount do students
    get?"; one naming a founder ("in 2014 by Theodore Scott") does not say where a company is."""
    for question in ("How quickly is the refund paid?", "How soon are complaints answered?",
                     "What discount do students get?", "What average wait do callers have?"):
        assert answer_type(question) == "number", question
    assert not has_answer_type("Bad weather cancelled many sailings.", "number", "How quickly is the refund paid?")
    where = "What is PharmaCann's headquarters location?"
    assert not has_answer_type("PharmaCann was founded in 2014 by Theodore Scott.", "place", where)
    assert has_answer_type("It is headquartered in the state of Illinois.", "place", where)
    assert has_answer_type("It was founded by Ann Lee in Chicago.", "place", "Where was it founded?")


def test_how_long_and_how_quickly_want_a_span_with_its_unit() -> None:
    question = "How long is the Green route crossing?"
    for text in ("It takes 50 minutes.", "It is a short 20-minute hop.", "Refunds take 5 working days.",
                 "The bridge is 2 km long.", "It has run since 2001.", "It takes a few hours."):
        assert has_answer_type(text, "number", question), text
    for text in ("It opened in May 2021.", "It costs 28 euros.", "Bad weather cancelled 186 sailings."):
        assert not has_answer_type(text, "number", question), text
    assert has_answer_type("It costs 28 euros.", "number", "How much does it cost?")
    assert has_answer_type("It opened in 2021.", "date", "How long ago did it open?")


def test_the_words_that_only_ask_for_a_date_or_number_are_the_kind_words() -> None:
    assert kind_words("How long is the Green route crossing?") == {"long"}
    assert kind_words("In what year was the tower built?") == {"year"}
    assert kind_words("How many halls does it have?") == {"many"}
    assert kind_words("Who directed the film?") == kind_words("What is theranostics?") == set()
    assert kind_words("How far ahead must freight be booked?") == {"far", "ahead"}  # "far ahead" asks for a span


def test_an_answer_of_its_kind_holds_the_words_that_ask_for_a_date_a_span_a_price_or_a_count() -> None:
    assert answered_kind_words("How long is the refund window?") == {"long"}  # "within 30 days" answers it
    assert answered_kind_words("In what year was the tower built?") == {"year"}
    assert answered_kind_words("How far ahead must freight be booked?") == {"far", "ahead"}
    # A price answers "how much" and "cost" (the plain case read it as 0% of the question's focus words).
    ticket = "An adult ticket to the city museum costs 12 euros; children under 12 enter free."
    assert answered_kind_words("How much does an adult ticket cost?", ticket) == {"much", "cost"}
    assert answered_kind_words("How much does an adult ticket cost?", "The museum opens at 9:00.") == set()
    # A count answers "how many" only beside what it counts: nearly any sentence holds a number.
    assert answered_kind_words("How many halls does it have?", "It opened with two exhibition halls.") == {"many"}
    assert answered_kind_words("How many halls does it have?", "It opened in 2001 with a cafe.") == set()
    assert answered_kind_words("What discount do groups get?") == set()


def test_how_much_does_it_cost_asks_for_a_price_and_a_price_answers_it() -> None:
    for question in ("How much does an adult ticket cost?", "What is the price of an adult ticket?",
                     "What does an adult ticket cost?", "What's the entry fee?"):
        assert answer_type(question) == "price", question
    for text in ("It costs 12 euros.", "Entry is €12.", "Tickets are US$4.8 each.", "Children enter free."):
        assert has_answer_type(text, "price", "How much does a ticket cost?"), text
    assert not has_answer_type("It has 12 rooms.", "price", "How much does a ticket cost?")
    assert answer_type("How long does the crossing take?") == answer_type("How many halls does it have?") == "number"


def test_a_do_question_subject_ends_before_its_plain_verb() -> None:
    """Each sub-question keeps its own subject: "an adult ticket", not "an adult ticket cost"; a possessive
    names what is asked of ("the museum" of "the museum's opening hours")."""
    assert question_topic("How much does an adult ticket cost?") == "an adult ticket"
    assert question_topic("What landmarks does Trolleybus Route 20 pass by?") == "Trolleybus Route 20"
    assert question_topic("When did Pope Benedict XVI resign?") == "Pope Benedict XVI"
    assert question_topic("How does the Rainbow Plaque programme compare to other plaque programmes?") == \
        "the Rainbow Plaque programme"
    assert question_topic("What are the museum's opening hours?") == "the museum"
    assert question_topic("What is PharmaCann's headquarters location?") == "PharmaCann"
    assert question_topic("Who will serve as the festival's opening film?") is None
    assert split_questions("What are the museum's opening hours and how much does an adult ticket cost?") == [
        "What are the museum's opening hours?", "How much does an adult ticket cost?"]
    assert split_questions("What are the museum's opening hours and when does it close?") == [
        "What are the museum's opening hours?", "When does the museum close?"]
    assert split_questions("How much does an adult ticket cost?") == ["How much does an adult ticket cost?"]


def test_answer_types_of_questions_and_texts() -> None:
    assert answer_type("When was the tower completed?") == "date"
    assert answer_type("How many halls does it have?") == "number"
    assert answer_type("Who directed the film Oppenheimer?") == "person"
    assert answer_type("Where will the mission be launched from?") == "place"
    assert answer_type("What is theranostics?") is None
    assert has_answer_type("It opened in 2001.", "date", "When did it open?")
    assert not has_answer_type("It opened with two halls.", "date", "When did it open?")
    assert has_answer_type("Christopher Nolan directed it.", "person", "Who directed the film Oppenheimer?")
    assert not has_answer_type("The film Oppenheimer is long.", "person", "Who directed the film Oppenheimer?")
    assert has_answer_type("It launches from the Satish Dhawan Space Centre.", "place", "Where is PSLV launched?")
