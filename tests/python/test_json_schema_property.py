"""Property tests of the JSON Schema converter over the 290 real-world schemas of
testdata/structured/schemas.jsonl, through build/grammar_schema_tool (src/grammar/testing/tool):

- every schema is either refused with a message naming a keyword, or
  (a) random token-by-token walks through the matcher (a real tokenizer's vocabulary) end in
      texts that python `jsonschema` validates, and
  (c) walks under a random token limit of at least the grammar's shortest completion in bytes
      (TokenMatcher::SetTokenLimit, docs/grammar.md: Length-aware masks), choosing uniformly
      among the allowed tokens and never stopping early, end within the limit in texts that
      python `jsonschema` validates, and
  (b) valid documents drawn from the schema (tests/python/schema_docs.py, kept only when
      `jsonschema` validates them), written compactly and as json.dumps writes them, are accepted.

The support rate and the refusals by keyword are printed (pytest -s) and must stay >= 90%.
Env: TACHYON_SCHEMA_WALKS (walks per schema, default 1), TACHYON_SCHEMA_LIMITED_WALKS (limited
walks per schema, default 1), TACHYON_SCHEMA_DOCS (documents per schema, default 4), TACHYON_SCHEMA_TOKENIZER (default llama3), GRAMMAR_SCHEMA_TOOL (the tool).
"""

import collections
import json
import os
import random
import re
import subprocess

import pytest

import conftest
from schema_docs import candidates

jsonschema = pytest.importorskip("jsonschema")

MIN_SUPPORT = 0.90


def tool_path():
    env = os.environ.get("GRAMMAR_SCHEMA_TOOL")
    return env if env else str(conftest.binary_path().parent / "grammar_schema_tool")


def validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def is_valid(v, doc):
    try:
        return next(v.iter_errors(doc), None) is None
    except Exception:  # the reference validator fails on this schema (bad regex, odd $ref)
        return None


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tool = tool_path()
    if not os.path.exists(tool):
        pytest.skip(f"grammar_schema_tool not found at {tool} (set GRAMMAR_SCHEMA_TOOL)")
    schemas_file = conftest.testdata_dir() / "structured" / "schemas.jsonl"
    tok = conftest.testdata_dir() / "tokenizers" / os.environ.get("TACHYON_SCHEMA_TOKENIZER", "llama3")
    if not schemas_file.exists() or not tok.exists():
        pytest.skip(f"testdata missing: {schemas_file} / {tok} (set TACHYON_TESTDATA)")
    rows = [json.loads(line) for line in schemas_file.read_text().splitlines() if line]
    rng = random.Random(18)
    n_docs = int(os.environ.get("TACHYON_SCHEMA_DOCS", "4"))
    tmp = tmp_path_factory.mktemp("schemas")
    docs_file = tmp / "docs.jsonl"
    drawn = {}
    with open(docs_file, "w") as f:
        for row in rows:
            v = validator(row["schema"])
            texts = []
            for doc in candidates(row["schema"], rng, n_docs):
                if is_valid(v, doc):
                    texts.append(json.dumps(doc, ensure_ascii=False, separators=(",", ":")))
                    texts.append(json.dumps(doc, ensure_ascii=False))
            drawn[row["id"]] = len(texts) // 2
            f.write(json.dumps({"id": row["id"], "docs": texts}) + "\n")
    out = tmp / "out.jsonl"
    subprocess.run([tool, "--schemas", str(schemas_file), "--tokenizer", str(tok),
                    "--docs", str(docs_file), "--out", str(out),
                    "--walks", os.environ.get("TACHYON_SCHEMA_WALKS", "1"),
                    "--limited-walks", os.environ.get("TACHYON_SCHEMA_LIMITED_WALKS", "1"),
                    "--max-tokens", "200", "--seed", "18"], check=True, timeout=600)
    results = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert len(results) == len(rows)
    return rows, results, drawn


def test_refusals_name_a_keyword(run):
    rows, results, _ = run
    refused = collections.Counter()
    for r in results.values():
        if "refused" in r:
            m = re.search(r"keyword '([^']+)' at (/\S*)", r["refused"])
            assert m or "admits no value" in r["refused"], r
            refused[m.group(1) if m else "unsatisfiable"] += 1
    supported = len(rows) - sum(refused.values())
    print(f"\nJSON Schema support: {supported}/{len(rows)} = {supported / len(rows):.1%}; "
          f"refused by keyword: {dict(refused.most_common())}")
    assert supported / len(rows) >= MIN_SUPPORT


def test_walks_produce_valid_documents(run):
    rows, results, _ = run
    schemas = {row["id"]: row["schema"] for row in rows}
    bad, walks, unchecked = [], 0, 0
    for id, r in results.items():
        if "refused" in r:
            continue
        assert not r["dead_ends"], (id, r["dead_ends"])
        v = validator(schemas[id])
        for text in r["walks"]:
            walks += 1
            try:
                doc = json.loads(text)
            except ValueError as e:
                bad.append((id, text, str(e)))
                continue
            ok = is_valid(v, doc)
            if ok is None:
                unchecked += 1
            elif not ok:
                err = next(v.iter_errors(doc))
                bad.append((id, text, err.message))
    print(f"\nwalks: {walks} finished texts checked ({unchecked} not checkable), "
          f"{len(bad)} invalid")
    assert walks > 0
    assert not bad, bad[:5]


def test_limited_walks_end_in_valid_documents(run):
    rows, results, _ = run
    schemas = {row["id"]: row["schema"] for row in rows}
    bad, walks, unchecked = [], 0, 0
    for id, r in results.items():
        if "refused" in r:
            continue
        v = validator(schemas[id])
        for w in r["limited"]:
            walks += 1
            assert w["tokens"] <= w["limit"], (id, w)
            if not w["ended"]:
                bad.append((id, w["limit"], w["text"][-200:], "did not end"))
                continue
            try:
                doc = json.loads(w["text"])
            except ValueError as e:
                bad.append((id, w["limit"], w["text"], str(e)))
                continue
            ok = is_valid(v, doc)
            if ok is None:
                unchecked += 1
            elif not ok:
                bad.append((id, w["limit"], w["text"], next(v.iter_errors(doc)).message))
    print(f"\nlimited walks: {walks} checked ({unchecked} not checkable), {len(bad)} bad")
    assert walks > 0
    assert not bad, bad[:5]


def test_valid_documents_are_accepted(run):
    rows, results, drawn = run
    rejected, checked = [], 0
    for id, r in results.items():
        if "refused" in r:
            continue
        checked += r["checked"]
        rejected += [(id, d) for d in r["rejected"]]
    print(f"\ndocuments: {checked} valid texts checked, {len(rejected)} rejected")
    assert checked > 0
    assert not rejected, rejected[:5]
