"""glmcot.data: synthetic GRBench-schema domains with template questions, gold answers and gold
plans (`glmcot.data.synth`), the GRBench question loader, and the domain schemas."""

from glmcot.data.grbench import load_grbench
from glmcot.data.questions import (QUESTIONS_FORMAT, GLMStep, GraphCoTAction, Plan, QuestionFormatError,
                                   QuestionRecord, read_questions, write_questions)
from glmcot.data.schemas import DOMAINS, DomainSchema, canonical_domain, graph_definition, load_schema

__all__ = ["DOMAINS", "DomainSchema", "GLMStep", "GraphCoTAction", "Plan", "QUESTIONS_FORMAT",
           "QuestionFormatError", "QuestionRecord", "canonical_domain", "graph_definition",
           "load_grbench", "load_schema", "read_questions", "write_questions"]
