"""Which findings report a symptom the cause engine explains: a table of rule codes and nothing else,
so the rules engine can tell whether a check needs the engine at all without loading it."""

from __future__ import annotations

from typing import Literal

SymptomKind = Literal["collective-slow", "collective-failed", "rank-slow", "copy-slow", "memory-low", "compute-low"]
# The findings that report a symptom, by code; the others (a setting, a link state) are causes themselves.
SYMPTOMS: dict[str, SymptomKind] = {
    "TD001": "collective-slow",
    "TD011": "collective-slow",
    "TD012": "collective-slow",
    "TD020": "collective-slow",
    "TD005": "collective-failed",
    "TD006": "rank-slow",
    "TD701": "copy-slow",
    "TD703": "copy-slow",
    "TD704": "copy-slow",
    "TD717": "copy-slow",
    "TD710": "memory-low",
    "TD711": "memory-low",
    "TD712": "compute-low",
}
