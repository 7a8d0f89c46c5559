"""What agents call: the five primitives, vertex chunks and Graph-CoT's observation sentences."""
