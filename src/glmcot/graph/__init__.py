"""glmcot.graph: the graph layer (imports nothing else of glmcot).

- ``store``: the memory-mapped store (typed CSR topology, columnar features), ``StoreWriter``
- ``importer``: streaming import of GRBench ``graph.json``
- ``retrieval``: node embeddings, FAISS index, the RetrieveNode cache
- ``primitives``: ``GraphTools`` (RetrieveNode, NodeInfo, NodeFeature, NeighbourCheck, NodeDegree)
- ``chunks``: canonical vertex chunks and their reuse keys
- ``graphcot``: the original Graph-CoT observation sentences, for the baseline
- ``commands``: ``glmcot graph import|info|embed|call``
"""

# The layers that register how updated stores and their indexes open (Graph.open_committed_version,
# NodeRetriever.open_updated): loaded with the package, so every reader can open an updated store.
from glmcot.graph import index_updates, versions  # noqa: E402, F401
