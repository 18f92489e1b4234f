from __future__ import annotations

from pathlib import Path

from bench.profile import ELSE, flame_graph, read_stacks, stage_of


def test_a_sample_is_charged_to_the_stage_of_its_innermost_frame_that_has_one(tmp_path: Path) -> None:
    raw = tmp_path / "node.txt"
    raw.write_text(
        "run (threading.py);ElasticsearchClient.bulk (skyoap/storage/elasticsearch/client.py);"
        "dumps (orjson) 7\n"
        "run (threading.py);ElasticsearchClient.bulk (skyoap/storage/elasticsearch/client.py);"
        "Urllib3HttpNode.perform_request (elastic_transport/_node/_http_urllib3.py) 3\n"
        "run (threading.py);measure (skyoap/receiver/segments.py);Condition.wait (threading.py) 2\n"
        "run (threading.py);sleep (time.py) 1\n"
    )
    stacks = read_stacks(raw)
    charged = {stage_of(list(stack)): count for stack, count in stacks.items()}
    assert charged == {
        "serialisation (JSON)": 7,
        "Elasticsearch client and HTTP": 3,
        "measuring (spans to metrics)": 2,
        ELSE: 1,
    }
    svg = flame_graph(stacks, "a <node>")
    assert svg.startswith("<svg") and "a &lt;node&gt;" in svg
    bulk = "ElasticsearchClient.bulk (skyoap/storage/elasticsearch/client.py)"
    assert f"<title>{bulk}: 10 samples, 76.9%</title>" in svg
