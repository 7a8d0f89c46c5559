"""GRBench question templates per domain (see base.py for the machinery)."""

from __future__ import annotations

import importlib

from glmcot.data.schemas import canonical_domain
from glmcot.data.templates.base import TemplateSet


def template_set(domain: str) -> TemplateSet:
    """The domain's templates, sorted by GRBench block number (qid order)."""
    module = importlib.import_module(f"glmcot.data.templates.{canonical_domain(domain)}")
    module.T.templates.sort(key=lambda t: int(t.template.split("/")[1]))
    return module.T
