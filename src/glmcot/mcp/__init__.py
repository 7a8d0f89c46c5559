"""glmcot as an MCP server (`glmcot mcp`): the graphs, the agents and the five primitives as
tools for MCP hosts and outside agents. The SDK (`pip install 'glmcot[mcp]'`) is imported only by
`glmcot.mcp.server` and `glmcot.mcp.run`, so `glmcot --help` works without it."""
