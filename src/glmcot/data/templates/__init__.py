"""GRBench question templates per domain (see base.py for the machinery)."""

from __future__ import annotations

import importlib

from glmcot.data.schemas import canonical_domain
from glmcot.data.templates.base import TemplateSet


def template_set(domain: str) -> TemplateSet:
    module = importlib.import_module(f"glmcot.data.templates.{canonical_domain(domain)}")
    return module.T
