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
    assert "| dblp | Graph-CoT | 20,000 | 10.0 | 10.00 | 20.00 | 0.10 | 30.0% | 3/4 |" in text
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
    assert "| Graph-CoT, LRU prefix cache | 0.50 | 4.00 |" in ablation_markdown(ablation)
