//! Pythonic calls, `[name(arg=value, ..)]`: a template that asks for them in Meta's words
//! (Llama 3.2's pythonic template and Llama 4's do) makes kiln constrain and parse replies in
//! that syntax; past calls go back to the template as data, which writes them its way.

use super::*;

/// A template asking for Python calls and writing past ones as Python (kiln's own, shaped
/// after Llama 3.2's headers).
const PYTHONIC_TEMPLATE: &str = concat!(
    "{{- bos_token }}{%- if tools %}<|start_header_id|>system<|end_header_id|>\n\n",
    "To call functions, answer with a list only, in the form ",
    "[func_name1(params_name1=params_value1, params_name2=params_value2), func_name2(params)].\n",
    "{{ tools | tojson }}<|eot_id|>{%- endif %}",
    "{%- for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n",
    "{%- if m['tool_calls'] %}[{%- for c in m['tool_calls'] %}{{ c['function']['name'] }}(",
    "{%- for k, v in c['function']['arguments'] | items %}{{ k }}={{ v | tojson }}",
    "{%- if not loop.last %}, {% endif %}{%- endfor %})",
    "{%- if not loop.last %}, {% endif %}{%- endfor %}]",
    "{%- else %}{{ m['content'] }}{%- endif %}<|eot_id|>{%- endfor %}",
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{%- endif %}",
);

#[tokio::test]
async fn pythonic_calls_are_constrained_parsed_and_streamed() {
    let base = tiny_with(PYTHONIC_TEMPLATE);
    // Past calls reach the template as data, written back in its syntax.
    let body = json!({"model": "tiny", "tools": tools(), "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "tool_calls": [{"id": "call-1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call-1", "content": "-3 C"}]});
    let text = rendered_by(&base, &body).await;
    assert!(
        text.contains("[get_weather(city=\"Oslo\")]<|eot_id|>"),
        "{text}"
    );

    required_calls_stream_whole(&base).await;

    // A named function: one call of it.
    let named = json!({"model": "tiny", "tools": tools(), "seed": 1, "temperature": 1.0,
        "max_tokens": 120, "tool_choice": {"type": "function", "function": {"name": "add"}},
        "messages": [{"role": "user", "content": "Add 2 and 3."}]});
    let (s, r) = post(&base, "/v1/chat/completions", &named).await;
    assert_eq!(s, 200, "{r}");
    let c = &r["choices"][0];
    if c["finish_reason"] != "length" {
        let calls = fitting_calls(c);
        assert_eq!(calls.len(), 1, "{c}");
        assert_eq!(calls[0].0, "add");
    }
}
