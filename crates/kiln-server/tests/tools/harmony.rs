//! gpt-oss's calls: a template writing the harmony format makes kiln constrain and read
//! replies as its messages, a call being a `commentary` message to `functions.NAME`; past
//! calls and results go back to the template as data.

use super::*;

/// A template in the harmony format (kiln's own, after gpt-oss's, shortened): the tools in a
/// developer message, each past call a message to its function ended by `<|call|>` after its
/// reasoning (`thinking`), each result a message from it.
const HARMONY_TEMPLATE: &str = concat!(
    "{%- if tools %}<|start|>developer<|message|># Tools\n",
    "{%- for t in tools %}\n{{ t.function.name }}: {{ t.function.parameters | tojson }}",
    "{%- endfor %}<|end|>{%- endif %}",
    "{%- for m in messages %}",
    "{%- if m.role == 'assistant' and m.tool_calls %}{%- set c = m.tool_calls[0].function %}",
    "{%- if m.thinking %}<|start|>assistant<|channel|>analysis<|message|>{{ m.thinking }}<|end|>",
    "{%- endif %}",
    "<|start|>assistant to=functions.{{ c.name }}<|channel|>commentary json<|message|>",
    "{{ c.arguments | tojson }}<|call|>",
    "{%- elif m.role == 'tool' %}",
    "<|start|>functions.{{ messages[loop.index0 - 1].tool_calls[0].function.name }} ",
    "to=assistant<|channel|>commentary<|message|>{{ m.content | tojson }}<|end|>",
    "{%- else %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{%- endif %}",
    "{%- endfor %}{%- if add_generation_prompt %}<|start|>assistant{%- endif %}",
);

#[tokio::test]
async fn harmony_calls_are_constrained_parsed_and_streamed() {
    let base = tiny_with(HARMONY_TEMPLATE);
    let body = json!({"model": "tiny", "tools": tools(), "messages": [
        {"role": "user", "content": "Add 2 and 3."},
        {"role": "assistant", "reasoning_content": "Use add.", "tool_calls": [{"id": "call-1", "type": "function",
            "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}}]},
        {"role": "tool", "tool_call_id": "call-1", "content": "5"}]});
    let text = rendered_by(&base, &body).await;
    let past = "<|start|>assistant<|channel|>analysis<|message|>Use add.<|end|><|start|>assistant to=functions.add<|channel|>commentary json<|message|>{\"a\": 2, \"b\": 3}<|call|>";
    assert!(text.contains(past), "{text}");
    assert!(
        text.contains("to=assistant<|channel|>commentary<|message|>\"5\""),
        "{text}"
    );

    // `required`: a reply that ends is one valid call, and streamed its arguments join to the
    // same call. A random model given room to reason or to write a preamble rarely ends
    // either, so `a` (of `analysis`) and `<` (of a preamble's `<|message|>`) are biased
    // against where the grammar leaves a choice (the grammar still writes them where it must).
    let bias = json!({"97": -100, "60": -100});
    required_calls_stream(&base, &json!({"logit_bias": bias}), false).await;
}
