//! GLM-4.5's calls, `<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>`:
//! a template that writes `<arg_key>` makes kiln constrain and parse replies in that syntax
//! (not Hermes', whose opener it shares); past calls go back to the template as data.

use super::*;

/// A template writing past calls as GLM-4.5's do (kiln's own, in its syntax): strings bare,
/// other values as JSON, a newline after each tag.
const GLM_TEMPLATE: &str = concat!(
    "[gMASK]<sop>{%- if tools %}<|system|>\n# Tools\n{% for t in tools %}{{ t | tojson }}\n",
    "{% endfor %}Call one as <tool_call>{name}\n<arg_key>{key}</arg_key>\n",
    "<arg_value>{value}</arg_value>\n</tool_call>{%- endif %}",
    "{%- for m in messages %}<|{{ m['role'] }}|>\n",
    "{%- if m['tool_calls'] %}{%- for c in m['tool_calls'] %}<tool_call>{{ c['function']['name'] }}\n",
    "{% for k, v in c['function']['arguments'] | items %}<arg_key>{{ k }}</arg_key>\n",
    "<arg_value>{{ v if v is string else v | tojson }}</arg_value>\n{% endfor %}</tool_call>",
    "{%- endfor %}{%- else %}{{ m['content'] }}{%- endif %}{%- endfor %}",
    "{%- if add_generation_prompt %}<|assistant|>\n{%- endif %}",
);

#[tokio::test]
async fn glm_calls_are_constrained_parsed_and_streamed() {
    let base = tiny_with(GLM_TEMPLATE);
    let body = json!({"model": "tiny", "tools": tools(), "messages": [
        {"role": "user", "content": "Add 2 and 3."},
        {"role": "assistant", "tool_calls": [{"id": "call-1", "type": "function",
            "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}}]},
        {"role": "tool", "tool_call_id": "call-1", "content": "5"}]});
    let text = rendered_by(&base, &body).await;
    let past = "<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>2</arg_value>\n<arg_key>b</arg_key>\n<arg_value>3</arg_value>\n</tool_call>";
    assert!(text.contains(past), "{text}");

    required_calls_stream_whole(&base).await;
}
