"""The offline judge's learned decisions: one logistic model per match type, over that decision's signals.

A model weighs the named signals of a decision (signals.py) into a probability that the match is 1.
Its weights are plain data in judge_model.json beside this module, reviewed in git and fitted by
`python -m benchmarks.train_judge` on licensed development data only (the file records which); no
code path fits or downloads anything at run time. The probability a model gives is the judge's raw
evidence score; calibration.py maps it to the p a verdict stores.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

MODEL_FILE = Path(__file__).with_name("judge_model.json")


@dataclass(frozen=True)
class Logistic:
    """p = sigmoid(bias + sum of weight * (value - center) / scale) over named features."""

    features: tuple[str, ...]
    center: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    def contributions(self, values: Mapping[str, float]) -> dict[str, float]:
        """Each feature's share of the log-odds: positive argues for a match, negative against."""
        return {
            name: w * (values[name] - c) / s
            for name, c, s, w in zip(self.features, self.center, self.scale, self.weights)
        }

    def probability(self, values: Mapping[str, float]) -> float:
        """P(match is 1) from the features' values."""
        z = self.bias + sum(self.contributions(values).values())
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def to_json(self) -> dict[str, Any]:
        """The model as plain data, the form judge_model.json keeps it in."""
        return {
            "features": list(self.features),
            "center": list(self.center),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
        }


def read_models(path: Path = MODEL_FILE) -> dict[str, Logistic]:
    """The fitted models {match type: Logistic} from a model file."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    models = {}
    for match_type, fit in data["models"].items():
        model = Logistic(
            tuple(fit["features"]),
            tuple(map(float, fit["center"])),
            tuple(map(float, fit["scale"])),
            tuple(map(float, fit["weights"])),
            float(fit["bias"]),
        )
        if not len(model.features) == len(model.center) == len(model.scale) == len(model.weights):
            raise ValueError(f"{path}: {match_type} needs one center, scale and weight per feature")
        models[match_type] = model
    return models


@lru_cache(maxsize=1)
def _models() -> dict[str, Logistic]:
    return read_models()


def model(match_type: str) -> Logistic:
    """The shipped model of one match type."""
    return _models()[match_type]
