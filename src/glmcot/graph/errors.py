"""Typed errors of the graph layer.

Lookup errors carry messages written for an LLM reader: they name the valid choices so a model
can correct its next call.
"""

from __future__ import annotations


class GraphFormatError(ValueError):
    """A graph file or store directory is malformed; the message names the place."""


class GraphToolError(Exception):
    """A graph primitive was called with something the graph cannot answer."""


class NodeNotFound(GraphToolError, LookupError):
    """No node has the given id."""


class FeatureNotFound(GraphToolError, LookupError):
    """The node's type has no such feature, or the node lacks a value for it."""


class RelationNotFound(GraphToolError, LookupError):
    """The node's type has no such relation."""


class RetrievalUnavailable(GraphToolError):
    """RetrieveNode was called on a graph without a node index."""
