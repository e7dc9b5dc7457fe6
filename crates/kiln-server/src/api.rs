//! Request types of the OpenAI API (what kiln reads), plus the sampling knobs both endpoints
//! share. Responses are built as JSON values in the route files.

use serde::Deserialize;

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum StopSpec {
    One(String),
    Many(Vec<String>),
}

impl StopSpec {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StopSpec::One(s) => vec![s],
            StopSpec::Many(v) => v,
        }
    }
}

#[derive(Deserialize, Debug, Clone, Default)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

/// Knobs shared by chat and completions (and kiln's extensions).
#[derive(Deserialize, Debug, Clone, Default)]
pub struct Sampling {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub min_p: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub repetition_penalty: Option<f32>,
    pub seed: Option<i64>,
    pub n: Option<u32>,
    pub stop: Option<StopSpec>,
    pub ignore_eos: Option<bool>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub max_tokens: Option<i64>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize, Debug, Clone)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct ChatMessageIn {
    pub role: String,
    pub content: Option<MessageContent>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<ChatMessageIn>,
    pub max_completion_tokens: Option<i64>,
    pub logprobs: Option<bool>,
    pub top_logprobs: Option<u32>,
    #[serde(flatten)]
    pub sampling: Sampling,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum PromptInput {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

#[derive(Deserialize, Debug, Clone)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: PromptInput,
    pub logprobs: Option<u32>,
    pub echo: Option<bool>,
    #[serde(flatten)]
    pub sampling: Sampling,
}

#[derive(Deserialize, Debug, Clone)]
pub struct TokenizeRequest {
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub messages: Option<Vec<ChatMessageIn>>,
    pub add_special_tokens: Option<bool>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct DetokenizeRequest {
    pub model: Option<String>,
    pub tokens: Vec<u32>,
}
