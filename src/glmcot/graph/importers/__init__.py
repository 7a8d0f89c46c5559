"""Importers: GRBench JSON, node/edge tables (CSV, Parquet, Neo4j, APOC), RDF; and the graph.json export."""
