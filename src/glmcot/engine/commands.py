"""`glmcot engine ...` commands."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

app = typer.Typer(rich_markup_mode=None, help="The native serving engine: generate with a local checkpoint or a random: model.",
                  no_args_is_help=True)


@app.command()
def generate(
    model: str = typer.Option(..., "--model", "-m", help="Checkpoint directory (config.json, *.safetensors, tokenizer.json) or random:<qwen2|qwen3|llama>:<tiny|tiny-qwen-vocab|small|0.6b|8b>."),
    prompt: str = typer.Option(..., "--prompt", "-p", help="Prompt text, completed as is (raw) unless --chat."),
    max_tokens: int = typer.Option(64, "--max-tokens", help="Most tokens to generate."),
    temperature: float = typer.Option(0.0, "--temperature", help="0 = greedy."),
    top_p: float = typer.Option(1.0, "--top-p", help="Nucleus sampling mass."),
    top_k: int = typer.Option(0, "--top-k", help="Keep the k most likely tokens (0 = off)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Sampling seed (reproducible sampling)."),
    stop: list[str] = typer.Option([], "--stop", help="Stop string (repeatable); not included in the output."),
    ignore_eos: bool = typer.Option(False, "--ignore-eos", help="Keep generating past end-of-sequence tokens."),
    chat: bool = typer.Option(False, "--chat", help="Wrap the prompt as a user message with the model's chat template."),
    dtype: str = typer.Option("float32", "--dtype", help="float32, bfloat16 or float16."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda[:N]."),
    model_seed: int = typer.Option(0, "--model-seed", help="Weight seed for random: models."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object: text, token_ids, counts, timings."),
) -> None:
    """Complete one prompt. Text streams to stdout as it is decoded (unless --json)."""
    from glmcot.engine import LLM, EngineConfig, SamplingParams
    from glmcot.engine.outputs import PromptTooLongError

    try:
        llm = LLM(EngineConfig(model=model, dtype=dtype, device=device, seed=model_seed))
        text = llm.tokenizer.apply_chat_template([{"role": "user", "content": prompt}]) if chat else prompt
        params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed, max_tokens=max_tokens,
                                stop=list(stop), ignore_eos=ignore_eos)
        engine = llm.engine
        if as_json:
            out = llm.generate([text], params)[0]
        else:
            engine.add_request(text, params, on_delta=lambda d: (sys.stdout.write(d), sys.stdout.flush()))
            out = None
            while engine.has_unfinished():
                for done in engine.step():
                    out = done
            sys.stdout.write("\n")
    except (ValueError, FileNotFoundError, PromptTooLongError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    if as_json:
        m = out.metrics
        typer.echo(json.dumps({"text": out.text, "token_ids": out.token_ids, "prompt_tokens": out.prompt_tokens,
                               "cached_tokens": out.cached_tokens, "finish_reason": out.finish_reason,
                               "ttft_s": m.ttft, "tpot_s": m.tpot, "e2e_s": m.e2e}, ensure_ascii=False))
