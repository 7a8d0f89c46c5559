from pathlib import Path

from glmcot.eval.plots import plot_ablation, plot_latency_split
from glmcot.eval.report import ablation_markdown, ratios, table1_markdown, table1_rich


def _rows():
    rows = []
    for domain, (gc, glm) in {"dblp": (10.0, 2.0), "amazon": (8.0, 1.0)}.items():
        rows.append({"domain": domain, "method": "graphcot", "tokens_per_question": 20000, "llm_calls_per_question": 10,
                     "latency_p50_s": gc, "latency_p99_s": gc * 2, "throughput_qps": 1 / gc, "cache_hit_rate": 0.3,
                     "em_count": 3, "questions": 4, "llm_time_mean_s": gc * 0.8, "retrieval_time_mean_s": gc * 0.2,
                     "latency_mean_s": gc})
        rows.append({"domain": domain, "method": "glm", "tokens_per_question": 1000, "llm_calls_per_question": 2.5,
                     "latency_p50_s": glm, "latency_p99_s": glm * 2, "throughput_qps": 1 / glm, "cache_hit_rate": 0.6,
                     "em_count": 4, "questions": 4, "llm_time_mean_s": glm * 0.9, "retrieval_time_mean_s": glm * 0.05,
                     "latency_mean_s": glm})
    return rows


def test_ratios_compare_glm_to_graphcot_per_domain():
    items = {i["domain"]: i for i in ratios(_rows())}
    assert items["dblp"]["token_reduction"] == 0.95
    assert items["dblp"]["calls_ratio"] == 4.0
    assert items["dblp"]["throughput_speedup"] == 5.0
    assert items["amazon"]["latency_p50_reduction"] == 1 - 1 / 8


def test_table1_markdown_and_rich():
    text = table1_markdown(_rows())
    assert "| dblp | Graph-CoT (faithful) | 20,000 | 10.0 | 10.00 | 20.00 | 0.10 | 30.0% | 3/4 |" in text
    assert "| amazon | GLM | 1,000 | 2.5 |" in text
    table = table1_rich(_rows())
    assert table.row_count == 4


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plots_are_written_at_laptop_size(tmp_path: Path):
    width, height = _png_size(plot_latency_split(_rows(), tmp_path / "f11.png", "test"))
    assert 900 <= width <= 1600 and 400 <= height <= 1000
    ablation = [{"label": "GLM (all features)", "method": "glm", "full": True, "throughput_qps": 2.0,
                 "latency_p50_s": 1.0, "cache_hit_rate": 0.6, "tokens_per_question": 900},
                {"label": "Graph-CoT, LRU prefix cache", "method": "graphcot", "throughput_qps": 0.5,
                 "latency_p50_s": 4.0, "cache_hit_rate": 0.2, "tokens_per_question": 9000, "throughput_vs_full": 0.25}]
    width, height = _png_size(plot_ablation(ablation, tmp_path / "f15.png"))
    assert 900 <= width <= 1600 and 300 <= height <= 1200
    assert "| Graph-CoT, LRU prefix cache | 0.50 | - | 4.00 |" in ablation_markdown(ablation)


def test_ratios_are_reported_for_both_baselines_and_labelled():
    from glmcot.eval.report import ratios_markdown

    rows = _rows() + [dict(r, method="graphcot-repaired", tokens_per_question=10000) for r in _rows()
                      if r["method"] == "graphcot"]
    items = ratios(rows)
    assert [(i["domain"], i["baseline"]) for i in items] == [
        ("dblp", "graphcot"), ("amazon", "graphcot"), ("dblp", "graphcot-repaired"), ("amazon", "graphcot-repaired")]
    assert items[2]["token_reduction"] == 0.9
    text = ratios_markdown(items)
    assert "| dblp | Graph-CoT (faithful) | -95.0 % |" in text and "| dblp | Graph-CoT (repaired) | -90.0 % |" in text


def test_ablation_shows_the_counter_that_proves_each_feature_acted(tmp_path: Path):
    from glmcot.eval.ablation import add_counters, evidence
    from glmcot.eval.report import ablation_rich

    full_counters: dict = {}
    add_counters(full_counters, {"evictions": 12, "evictions_p1": 0, "evictions_p2": 0, "evictions_p3": 4,
                                 "evictions_p4": 8, "chunk_hits_tokens": 0, "eviction_policy": "glm"},
                 {"cache_hits": 3, "prefetch_hits": 2, "prefetch_ready": 1, "prefetches": 5})
    rows = [
        {"variant": "glm", "label": "GLM (all features)", "method": "glm", "full": True, "throughput_qps": 2.0,
         "counters": full_counters, "throughput_by_repeat": [1.8, 2.2]},
        {"variant": "no-vertex-reuse", "label": "GLM without vertex reuse", "method": "glm", "throughput_qps": 2.1,
         "counters": {"chunk_hits_tokens": 0}},
        {"variant": "no-priority-eviction", "label": "GLM without priority eviction (LRU)", "method": "glm",
         "throughput_qps": 1.5, "counters": {"evictions": 20}},
        {"variant": "no-retrieve-cache", "label": "GLM without RetrieveNode cache", "method": "glm",
         "throughput_qps": 1.9, "counters": {"cache_hits": 0}},
        {"variant": "no-pipelining", "label": "GLM without pipelining", "method": "glm",
         "throughput_qps": 1.9, "counters": {"prefetch_hits": 0}},
    ]
    evidence(rows)
    text = ablation_markdown(rows)
    assert "evictions P1-P4 0/0/4/8, chunk hits 0 tok, prefetch hits 2 in flight + 1 done, RetrieveNode cache hits 3" in text
    assert "| 1.80-2.20 |" in text
    assert "not exercised (chunk_hits_tokens 0 in the full run)" in text
    assert "evictions: 12 full, 20 here" in text and "cache_hits: 3 full, 0 here" in text
    assert "prefetch_hits+prefetch_ready: 3 full, 0 here" in text  # a finished prefetch is pipelining too
    assert rows[1]["feature"]["exercised"] is False and rows[2]["feature"]["exercised"] is True
    assert ablation_rich(rows).row_count == 5
    _png_size(plot_ablation(rows, tmp_path / "f15.png", "dblp, 3 questions, 2 repeats"))


def test_tables_written_to_a_pipe_are_not_cut_at_80_columns(monkeypatch):
    from rich.table import Table

    from glmcot.eval.progress import console

    monkeypatch.delenv("COLUMNS", raising=False)
    out = console()
    table = Table(*[f"column number {i}" for i in range(8)])
    table.add_row(*[f"value {i:>10}" for i in range(8)])
    with out.capture() as captured:
        out.print(table)
    assert "column number 7" in captured.get() and "value          7" in captured.get()


def test_ablation_says_not_established_where_repeats_overlap():
    from glmcot.eval.ablation import throughput_verdict
    from glmcot.eval.report import ablation_rich

    rows = [
        {"variant": "glm", "label": "GLM (all features)", "full": True, "throughput_qps": 2.0, "throughput_by_repeat": [1.8, 2.2]},
        {"variant": "a", "label": "overlapping", "throughput_qps": 1.9, "throughput_by_repeat": [1.7, 1.9]},
        {"variant": "b", "label": "apart", "throughput_qps": 1.2, "throughput_by_repeat": [1.1, 1.3]},
        {"variant": "c", "label": "one repeat", "throughput_qps": 1.0, "throughput_by_repeat": [1.0]},
    ]
    throughput_verdict(rows)
    assert rows[1]["throughput_effect"].startswith("not established (repeats overlap")
    assert rows[2]["throughput_effect"] == "established (repeats do not overlap)"
    assert rows[3]["throughput_effect"].startswith("not established (one repeat")
    assert "glmcot bench kvsim" in rows[1]["throughput_effect"]
    text = ablation_markdown(rows)
    assert "| throughput effect |" in text and "not established (repeats overlap; at scale: glmcot bench kvsim)" in text
    assert ablation_rich(rows).row_count == 4
