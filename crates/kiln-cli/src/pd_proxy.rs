//! `kiln pd-proxy`: one address in front of a prefill server and a decode server (see
//! kiln-server's `pd_proxy`).

#[derive(clap::Args)]
pub struct Args {
    /// Base URL of the prefill server (`kiln serve --kv-role producer`).
    #[arg(long)]
    prefill: String,
    /// Base URL of the decode server (`kiln serve --kv-role consumer`).
    #[arg(long)]
    decode: String,
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 8000)]
    port: u16,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let cfg = kiln_server::pd_proxy::PdProxyConfig {
        prefill: a.prefill,
        decode: a.decode,
        host: a.host,
        port: a.port,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (_, task) = kiln_server::pd_proxy::start(cfg).await?;
        tokio::select! {
            r = task => Ok(r??),
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}
