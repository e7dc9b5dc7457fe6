"""The official `openai` Python client against a running `kiln serve` (the default model).

Needs KILN_BASE_URL (e.g. http://127.0.0.1:8123/v1); scripts/test-openai.sh sets it up.
Outputs are kept to a few tokens: the default model runs at a few tokens/s on lavapipe.
"""

import os

import openai
import pytest

BASE_URL = os.environ.get("KILN_BASE_URL", "http://127.0.0.1:8000/v1")
API_KEY = os.environ.get("KILN_API_KEY", "kiln-test")


@pytest.fixture(scope="module")
def client():
    return openai.OpenAI(base_url=BASE_URL, api_key=API_KEY, timeout=300, max_retries=0)


@pytest.fixture(scope="module")
def model(client):
    models = client.models.list()
    assert len(models.data) == 1
    return models.data[0].id


def test_models_list(client, model):
    assert model
    assert client.models.list().data[0].object == "model"


def test_chat(client, model):
    r = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=4,
        temperature=0,
    )
    assert r.object == "chat.completion"
    c = r.choices[0]
    assert c.message.role == "assistant"
    assert isinstance(c.message.content, str) and c.message.content
    assert c.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 0
    assert 0 < r.usage.completion_tokens <= 4
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_streaming_chat_matches_non_streaming(client, model):
    messages = [{"role": "user", "content": "Say hello."}]
    full = client.chat.completions.create(model=model, messages=messages, max_tokens=4, temperature=0)
    stream = client.chat.completions.create(
        model=model,
        messages=messages,
        max_tokens=4,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert text == full.choices[0].message.content
    assert finish == full.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == full.usage.completion_tokens
    # The second identical prompt finds the first in the prefix cache.
    assert usage.prompt_tokens_details.cached_tokens > 0


def test_completions_token_ids_and_logprobs(client, model):
    r = client.completions.create(model=model, prompt=[[504, 3458, 314], [504, 3458]], max_tokens=3, temperature=0, logprobs=2)
    assert r.object == "text_completion"
    assert len(r.choices) == 2
    for c in r.choices:
        lp = c.logprobs
        assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) >= 1
        assert all(x <= 0.0 for x in lp.token_logprobs)
        assert all(1 <= len(t) <= 2 for t in lp.top_logprobs)
    assert r.usage.prompt_tokens == 5


def test_errors_are_openai_errors(client, model):
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=model, messages=[], max_tokens=2)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}], max_tokens=2)
    bad = openai.OpenAI(base_url=BASE_URL, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
