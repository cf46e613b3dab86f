"""THELMA's own Appendix A examples (A.1-A.6), run end to end through the engine with the default judge.

The texts are the paper's, quoted with its PDF extraction artefacts repaired ("(1864,Äì1885), Ι gueen"
reads "(1864–1885), a queen"). The paper's figures: SP1 0.5, SQC 0.5, RP 3/7, RQC 0.5, SD 1/3, GR 5/7.

The paper's figures are the judge's decisions, every verdict counted: the band closed. At the default
uncertainty band a verdict the calibrated judge is unsure of leaves the score and is counted as unsure,
so there a score is the paper's or says how many of its verdicts were unsure.
"""
from __future__ import annotations

import asyncio

import pytest

from evaluators.core.records import Item
from evaluators.judges.offline import OfflineJudge
from evaluators.metrics import registry
from evaluators.metrics import thelma as metrics

CLOSED = (0.5, 0.5)  # no p lies strictly inside: every verdict counts as decided
QUERY = "When was the Chimnabai Clock Tower completed, and who was it named after?"
A1_SOURCES = (
    "The Chimnabai Clock Tower, also known as the Raopura Tower, is a clock tower situated in the Raopura area of "
    "Vadodara, Gujarat, India. It was completed in 1896 and named in memory of Chimnabai I (1864–1885), a queen and "
    "the first wife of Sayajirao Gaekwad III of Baroda State. It was built in Indo-Saracenic architecture style.",
    "Chimnabai Clock Tower was inaugurated by Mir Kamaluddin Hussainkhan, the last Nawab of Baroda. During the rule "
    "of Gaekwad, it was a stoppage for horse drawn trams. It was constructed from the funds raised by the citizens of "
    "Baroda State. The premises of the tower were rented by the Vadodara Municipal Corporation for last three "
    "decades. In 2017, the municipal commissioner, Rao, ordered to vacate the tower to conserve it as a heritage "
    "monument. The mechanical system of the tower clock was replaced by DC motor.",
)
A2_SOURCE = (
    "The Chimnabai Clock Tower, also known as the Raopura Tower, is a clock tower situated in the Raopura area of "
    "Vadodara, Gujarat, India. It was completed in 1896. It was built in Indo-Saracenic architecture style. History\n\n"
    "It was inaugurated by Mir Kamaluddin Hussainkhan, the last Nawab of Baroda. During the rule of Gaekwad, it was a "
    "stoppage for horse drawn trams. It was constructed from the funds raised by the citizens of Baroda State. The "
    "premises of the tower were rented by the Vadodara Municipal Corporation for the last three decades. In 2017, the "
    "municipal commissioner, Vinod Rao, ordered to vacate the tower to conserve it as a heritage monument. The "
    "mechanical system of the tower clock was replaced by DC motor."
)
A3_RESPONSE = ("The Chimnabai Clock Tower was completed in 1896. It was named after Chimnabai I, who was a queen and "
               "the first wife of Sayajirao Gaekwad III of Baroda State. The construction of clock tower was "
               "completed in 1896.")
A4_RESPONSE = "The Chimnabai Clock Tower was completed in 1896."
A6_SOURCE = (
    "The Chimnabai Clock Tower, also known as the Raopura Tower, is a clock tower situated in the Raopura area of "
    "Vadodara, Gujarat, India. It was completed in 1896 and named in memory of Chimnabai I (1864–1885), a queen and "
    "the first wife of Sayajirao Gaekwad III of Baroda State. It was built in Indo-Saracenic architecture style. "
    "History\n\nChimnabai Clock Tower was built in The tower was named after Chimnabai I (1864–1885), a queen and the "
    "first wife of Sayajirao Gaekwad III of Baroda State. was inaugurated by Mir Kamaluddin Hussainkhan, the last "
    "Nawab of Baroda. During the rule of Gaekwad, it was a stoppage for horse drawn trams. It was constructed from the "
    "funds raised by the citizens of Baroda State. The premises of the tower were rented by the Vadodara Municipal "
    "Corporation for the last three decades. In 2017, the municipal commissioner, Vinod Rao, ordered to vacate the "
    "tower to conserve it as a heritage monument. The mechanical system of the tower clock was replaced by DC motor."
)
A6_RESPONSE = A3_RESPONSE.replace("1896", "1856")

# (example, metric, sources, response, the paper's score, tolerance)
EXAMPLES = [
    ("A.1", "sp1", A1_SOURCES, A3_RESPONSE, 0.5, 1e-9),
    ("A.2", "sqc", (A2_SOURCE,), A3_RESPONSE, 0.5, 1e-9),
    ("A.3", "rp", (A6_SOURCE,), A3_RESPONSE, 3 / 7, 0.1),
    ("A.4", "rqc", (A6_SOURCE,), A4_RESPONSE, 0.5, 1e-9),
    ("A.5", "sd", (A6_SOURCE,), A3_RESPONSE, 1 / 3, 1e-9),
    ("A.6", "gr", (A6_SOURCE,), A6_RESPONSE, 5 / 7, 0.1),
]


@pytest.mark.parametrize("example,metric,sources,response,paper,tolerance", EXAMPLES,
                         ids=[f"{e[0]}-{e[1]}" for e in EXAMPLES])
def test_appendix_a_scores_as_the_paper_does(example: str, metric: str, sources: tuple[str, ...], response: str,
                                             paper: float, tolerance: float) -> None:
    item = Item(example, QUERY, sources, response)
    result = asyncio.run(metrics.evaluate_item(item, {metric: registry.METRICS[metric]}, OfflineJudge()))
    details = "\n".join(f"{v.component_idx}: {v.value} p={v.p} {v.detail}" for v in result.verdicts)
    decided = metrics.rescore(example, result.verdicts, {metric: registry.METRICS[metric]}, CLOSED)[metric]
    assert decided.value == pytest.approx(paper, abs=tolerance), f"{example} {metric} = {decided.value}\n{details}"
    (shown,) = result.scores  # at the default band, as stored and shown
    assert shown.n_scored + shown.n_unsure == decided.n_scored
    assert shown.value == pytest.approx(paper, abs=tolerance) or shown.n_unsure > 0, details
