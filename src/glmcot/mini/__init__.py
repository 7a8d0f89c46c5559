"""glmcot-mini: a small Qwen3-architecture agent model trained on the scripted policy's agent
calls (GLM's C/R/A agents, Graph-CoT's single agent) over synthetic graphs, so the agent loop can
run offline with real decoding.

    glmcot train-mini --preset cpu --out ~/.cache/glmcot/models/glmcot-mini
    glmcot ask --model glmcot-mini ...          # the native engine, prompts compacted (compact.py)

What it measures is in-distribution skill on GRBench's templates, not general reasoning.
"""

MODEL_NAME = "glmcot-mini"
