"""Errors come back in OpenAI's shape with the right HTTP status, and cost the engine nothing."""

import openai
import pytest

from conftest import MODEL_NAME


def error_of(status_body):
    status, headers, body = status_body
    assert isinstance(body, dict) and "error" in body, body
    err = body["error"]
    assert set(err) >= {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    return status, headers, err


def test_malformed_json_is_400(server):
    status, _, err = error_of(server.request("POST", "/v1/completions", raw=b'{"prompt": "x",'))
    assert status == 400
    assert err["type"] == "invalid_request_error"


@pytest.mark.parametrize("field,value", [
    ("temperature", -1), ("temperature", "hot"), ("top_p", 0), ("top_p", 2), ("top_k", 0.5),
    ("min_p", 1.5), ("presence_penalty", 5), ("frequency_penalty", -5),
    ("repetition_penalty", 0), ("max_tokens", 0), ("max_tokens", "ten"), ("n", 0), ("n", 1000),
    ("logprobs", 50), ("echo", "yes"), ("stop", 3), ("seed", "abc"), ("logit_bias", {"x": 1}),
    ("logit_bias", {"5": 500}), ("logit_bias", {"99999": 1}), ("stream", "no"), ("user", 1),
    ("stream_options", {"include_usage": True}), ("ignore_eos", 1),
])
def test_invalid_parameter_is_400_naming_it(server, field, value):
    body = {"model": MODEL_NAME, "prompt": "x", field: value}
    status, _, err = error_of(server.request("POST", "/v1/completions", body))
    assert status == 400
    assert err["param"] == field, err


def test_invalid_chat_parameters(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "x"}],
                                       top_logprobs=5)
    assert e.value.body["param"] == "top_logprobs"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "wizard", "content": "x"}])
    assert e.value.body["param"] == "messages[0].role"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL_NAME, messages=[])
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "http://x"}}]}])
    assert "image_url" in e.value.body["message"]


def test_prompt_beyond_context_is_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_NAME, prompt="Once upon a time", max_tokens=600)
    assert e.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL_NAME, prompt=[5] * 600, max_tokens=1)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_NAME, prompt=[5, 100000], max_tokens=1)
    assert e.value.body["param"] == "prompt"


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.completions.create(model="gpt-17", prompt="x", max_tokens=1)
    assert e.value.body["code"] == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-17", messages=[{"role": "user", "content": "x"}])


def test_api_key(server):
    bad = openai.OpenAI(base_url=server.base + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.completions.create(model=MODEL_NAME, prompt="x", max_tokens=1)
    status, _, err = error_of(server.request("POST", "/v1/completions", {"prompt": "x"},
                                             headers={"Authorization": ""}))
    assert status == 401
    assert server.request("GET", "/health", headers={"Authorization": ""})[0] == 200


def test_body_over_limit_is_413(server):
    status, _, err = error_of(server.request("POST", "/v1/completions",
                                             raw=b'{"prompt": "' + b"a" * 2_000_000 + b'"}'))
    assert status == 413


def test_health_ready_metrics(server):
    assert server.request("GET", "/health")[0] == 200
    assert server.request("GET", "/health/ready")[0] == 200
    m = server.metrics()
    for name in ["tachyon_num_requests_running", "tachyon_num_requests_waiting",
                 "tachyon_kv_cache_usage_ratio", "tachyon_prefix_cache_hit_rate",
                 "tachyon_prompt_tokens_total", "tachyon_generation_tokens_total",
                 "tachyon_time_to_first_token_seconds_count",
                 "tachyon_time_per_output_token_seconds_count",
                 "tachyon_e2e_request_latency_seconds_count",
                 "tachyon_request_queue_time_seconds_count"]:
        assert name in m, name
    assert server.request("GET", "/nope")[0] == 404


def test_errors_cost_the_engine_nothing(server, client):
    before = server.metrics()
    for _ in range(5):
        server.request("POST", "/v1/completions", {"prompt": "x", "temperature": 99})
        server.request("POST", "/v1/completions", {"model": "nope", "prompt": "x"})
    after = server.metrics()
    assert after["tachyon_prompt_tokens_total"] == before["tachyon_prompt_tokens_total"]
    assert after["tachyon_kv_cache_blocks_used"] == 0


def test_tokenize_detokenize(server):
    status, _, tok = server.request("POST", "/tokenize", {"prompt": "Once upon a time"})
    assert status == 200 and tok["tokens"][0] == 1 and tok["count"] == len(tok["tokens"])
    status, _, det = server.request("POST", "/detokenize", {"tokens": tok["tokens"]})
    assert status == 200 and det["prompt"].strip() == "Once upon a time"
    assert server.request("POST", "/detokenize", {"tokens": [99999]})[0] == 400
