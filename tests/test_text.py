"""English text handling: sentences, claims, sub-questions, numbers, negation and answer types."""
from __future__ import annotations

from evaluators.text import (answer_type, has_answer_type, negated, numbers, refuses, split_claims, split_questions,
                             split_sentences)

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
