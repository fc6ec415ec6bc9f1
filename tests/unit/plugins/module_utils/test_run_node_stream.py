"""The shared status directory: streams read from offsets, the lease rewritten."""
import json

from ansible_collections.clusterval.training.plugins.module_utils import _run_node


def test_only_complete_lines_are_read_and_the_offset_moves_past_them(tmp_path):
    (tmp_path / "nodes").mkdir()
    stream = tmp_path / "nodes" / "n1.jsonl"
    stream.write_text('{"t": "up"}\n{"t": "step", "step": 1}\n{"t": "st')
    found = _run_node.poll({"status_dir": str(tmp_path), "hosts": ["n1", "n2"], "offsets": {}})["nodes"]
    assert [r["t"] for r in found["n1"]["records"]] == ["up", "step"]
    assert found["n2"] == {"records": [], "offset": 0, "size": None}
    with open(stream, "a") as handle:
        handle.write('ep", "step": 2}\n')
    again = _run_node.read_all(str(tmp_path), ["n1"], {"n1": found["n1"]["offset"]})["n1"]
    assert again["records"] == [{"t": "step", "step": 2}]


def test_a_stream_started_anew_is_read_from_its_start_after_a_restarted_mark(tmp_path):
    (tmp_path / "nodes").mkdir()
    stream = tmp_path / "nodes" / "n1.jsonl"
    stream.write_text('{"t": "up"}\n{"t": "exit", "exit_code": 1}\n')
    first = _run_node.read_all(str(tmp_path), ["n1"], {})["n1"]
    stream.write_text('{"t": "up"}\n')
    again = _run_node.read_all(str(tmp_path), ["n1"], {"n1": first["offset"]})["n1"]
    assert again["records"] == [{"t": "restarted"}, {"t": "up"}]
    assert again["offset"] == len('{"t": "up"}\n')


def test_the_lease_is_rewritten_with_new_content(tmp_path):
    (tmp_path / "lease").write_text('{"renewal": 0, "go": false}')
    result = _run_node.poll({"status_dir": str(tmp_path), "hosts": [], "lease": {"renewal": 1, "go": True}})
    assert result["lease_renewed"]
    assert json.loads((tmp_path / "lease").read_text()) == {"renewal": 1, "go": True}
