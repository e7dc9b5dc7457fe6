"""The official `openai` Python client against a running `kiln serve` (the default model).

Needs KILN_BASE_URL (e.g. http://127.0.0.1:8123/v1); scripts/test-openai.sh sets it up.
Outputs are kept to a few tokens: the default model runs at a few tokens/s on lavapipe.
"""

import os
import time

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


def test_loglikelihood_as_evaluation_harnesses_ask(client, model):
    # lm-evaluation-harness scores a continuation this way: the context and continuation as
    # token ids, echo, logprobs 1, max_tokens 0, and it reads the continuation's entries.
    context, continuation = [504, 3458, 314, 1126], [6354, 16438]
    r = client.completions.create(model=model, prompt=[context + continuation], echo=True, logprobs=1, max_tokens=0, temperature=0)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == 6
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    scores = lp.token_logprobs[len(context):]
    assert all(x < 0.0 for x in scores)
    # The same continuation's first token, generated after the context, has the same score
    # when it is the greedy one; either way the top alternative matches.
    g = client.completions.create(model=model, prompt=[context], max_tokens=1, temperature=0, logprobs=1)
    want = g.choices[0].logprobs
    assert list(lp.top_logprobs[len(context)].keys()) == list(want.top_logprobs[0].keys())
    assert abs(list(lp.top_logprobs[len(context)].values())[0] - list(want.top_logprobs[0].values())[0]) < 2e-3
    assert r.usage.completion_tokens == 0


def test_errors_are_openai_errors(client, model):
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=model, messages=[], max_tokens=2)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}], max_tokens=2)
    bad = openai.OpenAI(base_url=BASE_URL, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


# --- Structured outputs and tool calling (grammar-constrained decoding) ---

import json
from typing import Literal

from pydantic import BaseModel, Field


class Weather(BaseModel):
    city: Literal["Paris", "London", "Tokyo"]
    unit: Literal["celsius", "fahrenheit"]


class Clock(BaseModel):
    timezone: Literal["UTC", "CET", "JST"]


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": Weather.model_json_schema(),
    },
}
CLOCK_TOOL = {
    "type": "function",
    "function": {"name": "get_time", "description": "Current time in a time zone.", "parameters": Clock.model_json_schema()},
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_named_tool_call_validates(client, model):
    r = client.chat.completions.create(
        model=model, messages=ASK, tools=[WEATHER_TOOL, CLOCK_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=80, temperature=0,
    )
    c = r.choices[0]
    assert c.finish_reason == "stop", c
    assert len(c.message.tool_calls) == 1
    call = c.message.tool_calls[0]
    assert call.type == "function" and call.id and call.function.name == "get_weather"
    Weather.model_validate_json(call.function.arguments)

    stream = client.chat.completions.create(
        model=model, messages=ASK, tools=[WEATHER_TOOL, CLOCK_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=80, temperature=0, stream=True,
    )
    calls, finish = {}, None
    for chunk in stream:
        for ch in chunk.choices:
            finish = ch.finish_reason or finish
            for d in ch.delta.tool_calls or []:
                if d.index not in calls:
                    assert d.id and d.type == "function" and d.function.name, "the first delta names the call"
                    calls[d.index] = {"name": d.function.name, "arguments": ""}
                calls[d.index]["arguments"] += d.function.arguments or ""
    assert finish == "stop"
    assert [v["name"] for v in calls.values()] == ["get_weather"]
    assert calls[0]["arguments"] == call.function.arguments


def test_required_tool_choice_calls_a_tool(client, model):
    r = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "What time is it in Tokyo?"}],
        tools=[WEATHER_TOOL, CLOCK_TOOL], tool_choice="required", max_tokens=120, temperature=0,
    )
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert c.message.tool_calls
    for call in c.message.tool_calls:
        schema = {"get_weather": Weather, "get_time": Clock}[call.function.name]
        schema.model_validate_json(call.function.arguments)


class Capital(BaseModel):
    country: str = Field(max_length=16)
    capital: str = Field(max_length=16)


def test_parse_with_a_pydantic_model(client, model):
    r = client.chat.completions.parse(
        model=model, messages=[{"role": "user", "content": "What is the capital of France?"}],
        response_format=Capital, max_tokens=80, temperature=0,
    )
    assert isinstance(r.choices[0].message.parsed, Capital)


def test_json_object_is_an_object(client, model):
    r = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Describe a cat as JSON."}],
        response_format={"type": "json_object"}, max_tokens=60, temperature=0,
    )
    c = r.choices[0]
    if c.finish_reason == "stop":
        assert isinstance(json.loads(c.message.content), dict)
    else:
        assert c.finish_reason == "length" and c.message.content.startswith("{")


def test_structured_outputs_choice(client, model):
    r = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Is Paris in France?"}],
        extra_body={"structured_outputs": {"choice": ["yes", "no"]}}, max_tokens=10, temperature=0,
    )
    assert r.choices[0].message.content in ("yes", "no")
    assert r.choices[0].finish_reason == "stop"


def test_tool_round_trip_with_tool_choice_none(client, model):
    messages = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21, "sky": "clear"}'},
    ]
    r = client.chat.completions.create(
        model=model, messages=messages, tools=[WEATHER_TOOL], tool_choice="none", max_tokens=8, temperature=0,
    )
    c = r.choices[0]
    assert not c.message.tool_calls
    assert isinstance(c.message.content, str) and c.message.content
    assert c.finish_reason in ("stop", "length")


def test_bad_tools_and_formats_are_400(client, model):
    with pytest.raises(openai.BadRequestError, match="no_such_tool"):
        client.chat.completions.create(
            model=model, messages=ASK, tools=[WEATHER_TOOL], tool_choice={"type": "function", "function": {"name": "no_such_tool"}}, max_tokens=4,
        )
    with pytest.raises(openai.BadRequestError, match="response_format"):
        client.chat.completions.create(
            model=model, messages=ASK, max_tokens=4,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "(unclosed"}}},
        )
    with pytest.raises(openai.BadRequestError, match="frobnicate"):
        client.chat.completions.create(model=model, messages=ASK, max_tokens=4, extra_body={"frobnicate": 1})


# The Responses API, as agent frameworks call it.

RESPONSES_WEATHER = {"type": "function", **WEATHER_TOOL["function"]}


def test_vllm_stopping_fields(client, model):
    ask = dict(model=model, messages=[{"role": "user", "content": "Say hi."}], temperature=0, max_tokens=12)
    plain = client.chat.completions.create(**ask, extra_body={"ignore_eos": True,
                                                             "return_tokens_as_token_ids": True}, logprobs=True)
    ids = [int(t.token.split(":")[1]) for t in plain.choices[0].logprobs.content]
    stopped = client.chat.completions.create(**ask, extra_body={"ignore_eos": True, "stop_token_ids": [ids[2]]})
    assert stopped.choices[0].finish_reason == "stop" and stopped.usage.completion_tokens <= 3
    # End-of-sequence forced by a bias is held off for min_tokens tokens.
    eos = client.chat.completions.create(**ask, logit_bias={"2": 100}, extra_body={"min_tokens": 4})
    assert eos.usage.completion_tokens == 5 and eos.choices[0].finish_reason == "stop", eos


def test_vllm_token_filters_usage_and_echo(client, model):
    ask = dict(model=model, messages=[{"role": "user", "content": "Say hi."}], temperature=0, max_tokens=6)
    plain = client.chat.completions.create(**ask, extra_body={"ignore_eos": True,
                                                             "return_tokens_as_token_ids": True}, logprobs=True)
    ids = [int(t.token.split(":")[1]) for t in plain.choices[0].logprobs.content]
    # Only the greedy reply's tokens but its second: the first stays, the second changes.
    allowed = [t for t in ids if t != ids[1]]
    got = client.chat.completions.create(**ask, logprobs=True, extra_body={
        "ignore_eos": True, "return_tokens_as_token_ids": True, "allowed_token_ids": allowed})
    got = [int(t.token.split(":")[1]) for t in got.choices[0].logprobs.content]
    assert got[0] == ids[0] and got[1] != ids[1] and set(got) <= set(allowed), (ids, got)
    # A bad word's tokens are not written.
    word = plain.choices[0].message.content.split()[0]
    banned = client.chat.completions.create(**ask, extra_body={"ignore_eos": True, "bad_words": [word]})
    assert banned.choices[0].message.content != plain.choices[0].message.content
    # Usage on every chunk, counting up, then the whole request's.
    chunks = list(client.chat.completions.create(**ask, stream=True, extra_body={"ignore_eos": True},
        stream_options={"include_usage": True, "continuous_usage_stats": True}))
    counts = [c.usage.completion_tokens for c in chunks]
    assert counts[0] == 0 and counts[-2] == 6 and counts[-1] == 6 and counts == sorted(counts), counts
    # echo: the reply starts with the final assistant message it continues.
    cont = client.chat.completions.create(
        model=model, max_tokens=3, temperature=0,
        messages=[{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hello"}],
        extra_body={"echo": True, "continue_final_message": True, "add_generation_prompt": False})
    assert cont.choices[0].message.content.startswith("Hello"), cont


def test_embeddings(client, model):
    # The client asks for base64 and decodes it.
    r = client.embeddings.create(model=model, input=["The capital of France is Paris.", "Paris is in France.",
                                                     "The capital of France is Paris."])
    v = [d.embedding for d in r.data]
    assert [d.index for d in r.data] == [0, 1, 2] and len(v[0]) == 576
    assert abs(sum(x * x for x in v[0]) - 1) < 1e-4
    assert max(abs(a - b) for a, b in zip(v[0], v[2])) < 1e-4
    assert max(abs(a - b) for a, b in zip(v[0], v[1])) > 1e-3
    assert r.usage.prompt_tokens > 10
    floats = client.embeddings.create(model=model, input="Paris is in France.", encoding_format="float")
    assert max(abs(a - b) for a, b in zip(floats.data[0].embedding, v[1])) < 1e-4


def test_responses_whole_and_streamed(client, model):
    ask = dict(model=model, instructions="Answer briefly.", input="What is the capital of France?",
               max_output_tokens=4, temperature=0)
    r = client.responses.create(**ask)
    assert r.object == "response" and r.status in ("completed", "incomplete")
    assert r.output[0].type == "message" and r.output_text
    assert 0 < r.usage.output_tokens <= 4 and r.usage.input_tokens > 0
    text, kinds, final = "", [], None
    for event in client.responses.create(**ask, stream=True):
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type in ("response.completed", "response.incomplete"):
            final = event.response
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert text == r.output_text and final.output_text == r.output_text
    assert final.usage.output_tokens == r.usage.output_tokens


def test_responses_include_logprobs(client, model):
    ask = dict(model=model, instructions="Answer briefly.", input="What is the capital of France?",
               max_output_tokens=4, temperature=0, include=["message.output_text.logprobs"], top_logprobs=2)
    r = client.responses.create(**ask)
    part = r.output[0].content[0]
    assert part.type == "output_text" and 0 < len(part.logprobs) <= 4
    assert all(len(lp.top_logprobs) == 2 and lp.logprob <= 0 for lp in part.logprobs)
    assert part.logprobs[0].token == part.logprobs[0].top_logprobs[0].token  # greedy
    streamed = []
    for event in client.responses.create(**ask, stream=True):
        if event.type == "response.output_text.delta":
            streamed += event.logprobs
    assert [(lp.token, lp.logprob) for lp in streamed] == [(lp.token, lp.logprob) for lp in part.logprobs]
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=model, input="Hi", top_logprobs=2)


def test_responses_continue_a_stored_response(client, model):
    first = client.responses.create(model=model, input="Name a fruit.", max_output_tokens=3, temperature=0)
    second = client.responses.create(model=model, input="And a color?", previous_response_id=first.id,
                                     max_output_tokens=3, temperature=0)
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert client.responses.retrieve(first.id).output_text == first.output_text
    items = list(client.responses.input_items.list(second.id, order="asc"))
    assert [i.role for i in items] == ["user", "assistant", "user"]
    assert items[0].content[0].text == "Name a fruit." and items[2].content[0].text == "And a color?"
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)


def test_responses_in_the_background(client, model):
    ask = dict(model=model, input="Name a fruit.", max_output_tokens=6, temperature=0)
    fore = client.responses.create(**ask)
    r = client.responses.create(**ask, background=True)
    assert r.background and r.status == "queued"
    while r.status in ("queued", "in_progress"):
        time.sleep(0.05)
        r = client.responses.retrieve(r.id)
    assert r.status == fore.status and r.output_text == fore.output_text
    # Streamed, dropped after the first event, picked up after it.
    stream = client.responses.create(**ask, background=True, stream=True)
    first = next(iter(stream))
    stream.close()
    text = ""
    for event in client.responses.retrieve(first.response.id, stream=True, starting_after=first.sequence_number):
        if event.type == "response.output_text.delta":
            text += event.delta
    assert text == fore.output_text
    long = client.responses.create(model=model, input="Write a story.", max_output_tokens=400, background=True,
                                   extra_body={"ignore_eos": True})
    assert client.responses.cancel(long.id).status == "cancelled"
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(fore.id)


def test_responses_function_call_round_trip(client, model):
    r = client.responses.create(
        model=model, input="What is the weather in Paris?", tools=[RESPONSES_WEATHER],
        tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=80, temperature=0,
    )
    calls = [i for i in r.output if i.type == "function_call"]
    assert r.status == "completed" and len(calls) == 1, r
    Weather.model_validate_json(calls[0].arguments)
    follow = client.responses.create(
        model=model, previous_response_id=r.id, tools=[RESPONSES_WEATHER], max_output_tokens=6, temperature=0,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"temperature": 21}'}],
    )
    assert follow.status in ("completed", "incomplete") and follow.output
    assert follow.usage.input_tokens_details.cached_tokens > 0, follow.usage


def test_responses_parse_with_a_pydantic_model(client, model):
    r = client.responses.parse(
        model=model, input="What is the capital of France?", text_format=Capital, max_output_tokens=80, temperature=0,
    )
    assert isinstance(r.output_parsed, Capital)
