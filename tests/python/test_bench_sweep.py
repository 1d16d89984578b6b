"""Smoke test of the load benchmark's sweep mode (bench/serve_load.py) at tiny sizes."""

import json
import shutil
import subprocess
import sys

import pytest

from conftest import REPO


def test_sweep_writes_json_and_png(server, tmp_path):
    if shutil.which("gnuplot") is None:
        pytest.skip("gnuplot not installed (scripts/setup.sh installs gnuplot-nox)")
    out_json, out_png = tmp_path / "sweep.json", tmp_path / "sweep.png"
    r = subprocess.run(
        [sys.executable, str(REPO / "bench" / "serve_load.py"), "--url", server.base,
         "--api-key", server.api_key, "--workload", "A,B", "--concurrency", "1,3",
         "--rounds", "1", "--prompt-tokens", "12", "--prefix-tokens", "20",
         "--suffix-tokens", "4", "--max-tokens", "5", "--json", str(out_json),
         "--png", str(out_png)],
        capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out_json.read_text())
    points = data["points"]
    assert [(p["workload"], p["concurrency"]) for p in points] == [
        ("A", 1), ("A", 3), ("B", 1), ("B", 3)]
    for p in points:
        assert p["ok"] == p["requests"] == p["concurrency"] and p["failed"] == 0
        assert p["max_tokens"] == 5
        assert p["output_tokens_per_s"] > 0 and p["request_throughput"] > 0
        assert 0 < p["ttft_p50_s"] <= p["ttft_p90_s"] <= p["ttft_p99_s"]
        assert 0 < p["tpot_p50_ms"] <= p["tpot_p99_ms"]
    assert points[0]["prompt_tokens"] == 12 and points[2]["prompt_tokens"] == 24
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| workload | concurrency |" in r.stdout


def test_sweep_rejects_bad_arguments(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "bench" / "serve_load.py"), "--workload", "C"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "workload" in r.stderr
    r = subprocess.run([sys.executable, str(REPO / "bench" / "serve_load.py"), "--concurrency",
                        "1,x"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "concurrency" in r.stderr
