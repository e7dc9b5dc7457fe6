"""The official `anthropic` Python client against a running `kiln serve` (the default model),
through kiln's Messages API. scripts/test-openai.sh sets it up (KILN_BASE_URL ends in /v1; the
client adds /v1 itself). Outputs are kept to a few tokens.
"""

import json
import os

import anthropic
import openai
import pytest

BASE_URL = os.environ.get("KILN_BASE_URL", "http://127.0.0.1:8000/v1").removesuffix("/v1")
API_KEY = os.environ.get("KILN_API_KEY", "kiln-test")

WEATHER = {
    "name": "get_weather",
    "description": "Current weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"enum": ["Paris", "London"]}},
                     "required": ["city"], "additionalProperties": False},
}


@pytest.fixture(scope="module")
def client():
    # The client sends the key as `x-api-key`.
    return anthropic.Anthropic(base_url=BASE_URL, api_key=API_KEY, timeout=300, max_retries=0)


@pytest.fixture(scope="module")
def model():
    return openai.OpenAI(base_url=BASE_URL + "/v1", api_key=API_KEY).models.list().data[0].id


def test_message_whole_and_streamed(client, model):
    # Greedy (the client's newest releases no longer take `temperature`; the API does).
    ask = dict(model=model, max_tokens=4, extra_body={"temperature": 0}, system="Answer briefly.",
               messages=[{"role": "user", "content": "What is the capital of France?"}])
    m = client.messages.create(**ask)
    assert m.type == "message" and m.content[0].type == "text" and m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens") and 0 < m.usage.output_tokens <= 4
    with client.messages.stream(**ask) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == m.content[0].text and final.content[0].text == text
    assert final.stop_reason == m.stop_reason


def test_a_final_assistant_message_is_continued(client, model):
    # Anthropic's prefill: the reply goes on from the assistant's words, as the chat API's
    # continue_final_message does on the same conversation.
    prefill = "The capital of France is"
    m = client.messages.create(model=model, max_tokens=3, extra_body={"temperature": 0},
                               messages=[{"role": "user", "content": "What is the capital of France?"},
                                         {"role": "assistant", "content": prefill}])
    chat = openai.OpenAI(base_url=BASE_URL + "/v1", api_key=API_KEY).chat.completions.create(
        model=model, max_tokens=3, temperature=0, extra_body={"continue_final_message": True},
        messages=[{"role": "user", "content": "What is the capital of France?"},
                  {"role": "assistant", "content": prefill}])
    assert m.content[0].text == chat.choices[0].message.content
    assert "Paris" in m.content[0].text, m


def test_tool_use_round_trip(client, model):
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    m = client.messages.create(model=model, max_tokens=80, extra_body={"temperature": 0}, tools=[WEATHER],
                               tool_choice={"type": "tool", "name": "get_weather"}, messages=ask)
    uses = [b for b in m.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].input["city"] in ("Paris", "London"), m
    turn = ask + [{"role": "assistant", "content": [u.model_dump() for u in uses]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": json.dumps({"temp": 21})}]}]
    counted = client.messages.count_tokens(model=model, tools=[WEATHER], messages=turn)
    follow = client.messages.create(model=model, max_tokens=4, extra_body={"temperature": 0}, tools=[WEATHER], messages=turn)
    assert follow.usage.input_tokens + follow.usage.cache_read_input_tokens == counted.input_tokens
    assert follow.usage.cache_read_input_tokens > 0


def test_errors_are_anthropic_errors(client, model):
    with pytest.raises(anthropic.BadRequestError, match="frobnicate"):
        client.messages.create(model=model, max_tokens=4, messages=[{"role": "user", "content": "x"}],
                               extra_body={"frobnicate": 1})
