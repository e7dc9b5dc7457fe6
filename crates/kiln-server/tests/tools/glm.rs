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

/// The calls of a finished choice, checked as offered tools' fitting calls, as (name, args).
fn glm_calls(choice: &Value) -> Vec<(String, Value)> {
    check_calls(choice, &["get_weather", "add"]);
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (calls.iter())
        .map(|c| {
            let args = c["function"]["arguments"].as_str().unwrap();
            let name = c["function"]["name"].as_str().unwrap().to_string();
            (name, serde_json::from_str(args).unwrap())
        })
        .collect()
}

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

    let (mut finished, mut streamed) = (0, 0);
    for seed in 0..4 {
        let ask = json!({"model": "tiny", "tools": tools(), "tool_choice": "required",
            "seed": seed, "temperature": 1.0, "max_tokens": 120,
            "messages": [{"role": "user", "content": "Weather in Oslo?"}]});
        let (s, r) = post(&base, "/v1/chat/completions", &ask).await;
        assert_eq!(s, 200, "{r}");
        let want = &r["choices"][0];
        if want["finish_reason"] == "length" {
            continue;
        }
        assert_eq!(want["finish_reason"], "tool_calls", "{want}");
        let calls = glm_calls(want);
        assert!(!calls.is_empty(), "{want}");
        finished += 1;
        // Streamed: the same calls, each one's arguments in one piece once it is closed.
        let mut s = ask.clone();
        s["stream"] = json!(true);
        let mut got: Vec<(String, String)> = Vec::new();
        for c in stream(&base, "/v1/chat/completions", &s).await {
            for tc in c["choices"][0]["delta"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(name) = tc["function"]["name"].as_str() {
                    got.push((name.to_string(), String::new()));
                }
                let args = tc["function"]["arguments"].as_str().unwrap();
                let last = got.last_mut().unwrap();
                assert!(last.1.is_empty() || args.is_empty(), "{tc}");
                last.1 += args;
            }
        }
        let got: Vec<(String, Value)> = (got.into_iter())
            .map(|(n, a)| (n, serde_json::from_str(&a).unwrap()))
            .collect();
        assert_eq!(got, calls);
        streamed += 1;
    }
    assert!(finished > 0 && streamed > 0, "no choice finished");
}
