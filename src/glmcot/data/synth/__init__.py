"""Synthetic GRBench-schema graphs with template questions, gold answers and gold plans."""

from glmcot.data.synth.core import SCALES, SynthGraph, resolve_scale
from glmcot.data.synth.generate import GENERATOR_VERSION, SynthConfig, build_graph, generate

__all__ = ["SCALES", "SynthGraph", "resolve_scale", "GENERATOR_VERSION", "SynthConfig",
           "build_graph", "generate"]
