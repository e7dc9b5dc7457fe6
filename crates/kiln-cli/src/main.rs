//! `kiln`: the command line. Each subcommand lives in its own file.

mod api_args;
mod bench;
mod chat;
mod device_args;
mod embed;
mod generate;
mod generation_config;
mod info;
mod local;
mod local_disk;
mod lora_modules;
mod model_path;
mod output_args;
mod pd_proxy;
mod sampling_args;
mod serve;
mod speed;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kiln",
    version,
    about = "An LLM inference engine on WGSL compute shaders (Vulkan, Metal, DX12, WebGPU)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text for a prompt, streaming it to stdout.
    Generate(generate::Args),
    /// Chat with a model in the terminal: history, streaming, Ctrl-C stops a reply.
    Chat(chat::Args),
    /// Print the GPU adapter and, with --model, the model's shape and memory needs.
    Info(info::Args),
    /// Embed texts (one JSON line per input: the model's last hidden state, unit length).
    Embed(embed::Args),
    /// Serve the OpenAI-compatible HTTP API.
    Serve(serve::Args),
    /// Benchmark an OpenAI-compatible server (kiln's or any other).
    Bench(bench::Args),
    /// Measure the engine in-process: copy bandwidth, decode at several concurrencies (with
    /// the fraction of the bandwidth roofline), prefill at several prompt lengths.
    Speed(speed::Args),
    /// Run a prefill server and a decode server as one: each request is prefilled on the
    /// first, its KV blocks move to the second, which decodes (prefill/decode split).
    PdProxy(pd_proxy::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Generate(a) => generate::run(a),
        Command::Chat(a) => chat::run(a),
        Command::Info(a) => info::run(a),
        Command::Embed(a) => embed::run(a),
        Command::Speed(a) => speed::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Bench(a) => bench::run(a),
        Command::PdProxy(a) => pd_proxy::run(a),
    }
}
