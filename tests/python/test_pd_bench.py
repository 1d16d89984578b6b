"""Smoke test of bench/pd_bench.py --alone-only at a small size: the TTFT pairs carry the
replicas' own split of each request (the prefill replica computed the disaggregated prompt and
the decode replica its tail), and the verdict says met or NOT met against the target."""

import json
import subprocess
import sys

from conftest import REPO, binary_path, require_smollm2


def test_alone_pairs_split_each_ttft_on_the_servers(tmp_path):
    model = require_smollm2()
    r = subprocess.run(
        [sys.executable, str(REPO / "bench" / "pd_bench.py"), "--binary", str(binary_path()),
         "--model", str(model), "--alone-only", "--long-tokens", "512", "--max-model-len",
         "1024", "--alone-reps", "2", "--alone-budget", "120", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((tmp_path / "results.json").read_text())
    assert len(res["alone"]) == 2
    assert [p["colocated_first"] for p in res["alone"]] == [False, True]  # alternating order
    for pair in res["alone"]:
        d, c = pair["disaggregated"], pair["colocated"]
        # The prefill replica computed the prompt and held its answer for the transfer; the
        # decode replica computed only the tail, which took it less than the prefill.
        assert d["prefill_compute"] > 0 and d["transfer_tail"] >= 0
        assert 0 < d["decode_compute"] < d["prefill_compute"]
        assert 0 < d["decode_first_token"] < d["ttft"]
        assert d["prefill_compute"] < d["ttft"]
        assert d["cpu"]["d_prefill"] > 0
        assert 0 < c["prefill_compute"] < c["ttft"]
        # The colocated request ran on one of its replicas, not on the idle disaggregated ones.
        assert max(c["cpu"]["c_replica0"], c["cpu"]["c_replica1"]) > c["cpu"]["d_prefill"]
    v = res["alone_verdict"]
    assert v["pairs"] == 2 and v["layer_s"] > 0
    assert ("medians: %.2f s <= %.2f s: %s" % (v["ttft_d"], v["bound"],
            "met" if v["met_medians"] else "NOT met")) in r.stdout
