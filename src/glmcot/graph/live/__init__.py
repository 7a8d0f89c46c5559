"""Live sources: graph databases behind the GraphSource seam (openCypher, SPARQL), and exports into them."""
