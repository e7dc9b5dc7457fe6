//! `kiln info`: the chat line names the tool call and reasoning formats kiln reads from the
//! model's chat template.

use kiln_model::testing::{TinyConfig, tiny_tokenizer, write_tiny_llama};

use super::kiln;

#[test]
fn info_names_the_chat_templates_tool_and_reasoning_formats() {
    let line = |tc: TinyConfig, tag: &str| {
        let dir = std::env::temp_dir().join(format!("kiln-cli-info-{tag}-{}", std::process::id()));
        write_tiny_llama(&dir, &tc, 3).unwrap();
        let out = kiln(&["info", "--model", dir.to_str().unwrap()]);
        std::fs::remove_dir_all(&dir).ok();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let chat = stdout
            .lines()
            .find(|l| l.starts_with("chat:"))
            .map(String::from);
        chat.unwrap_or_else(|| panic!("no chat line in {stdout}"))
    };
    let plain = line(TinyConfig::default(), "plain");
    assert!(
        plain.contains("kiln's generic JSON") && plain.contains("not set apart"),
        "{plain}"
    );
    let tools = TinyConfig {
        chat_template: Some(tiny_tokenizer::TOOLS_THINK_TEMPLATE.into()),
        ..TinyConfig::default()
    };
    let tools = line(tools, "tools");
    assert!(
        tools.contains("Hermes <tool_call> blocks") && tools.contains("<think> blocks, set apart"),
        "{tools}"
    );
}
