"""glmcot.graph: the graph layer (imports nothing else of glmcot).

- ``graph_source``: `GraphSource`, the one interface every consumer reads a graph through
- ``opener``: a location (store folder, dataset folder, database URL) -> a `GraphSource`
- ``storage``: the memory-mapped store (typed CSR topology, columnar features) and its writer
- ``updates``: update operations, deltas over an immutable base, numbered versions
- ``importers``: streaming import of GRBench JSON, node/edge tables, RDF; the graph.json export
- ``index``: node embeddings, the FAISS index and the RetrieveNode cache, with update overlays
- ``tools``: the five primitives, canonical vertex chunks, Graph-CoT's observation sentences
- ``live``: sources over graph databases (openCypher/FalkorDB, SPARQL) and the export into them
- ``commands``: ``glmcot graph import|info|export|embed|call|update``
"""

# The layers that register how updated stores and their indexes open (Graph.open_committed_version,
# NodeRetriever.open_updated): loaded with the package, so every reader can open an updated store.
from glmcot.graph.index import index_updates  # noqa: E402, F401
from glmcot.graph.updates import versions  # noqa: E402, F401
