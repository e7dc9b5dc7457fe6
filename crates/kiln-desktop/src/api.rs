//! The loaded engine served as the OpenAI-compatible API on a local port, beside the window:
//! the server takes the app's engine and front end, so API requests and the app's chats are
//! batched together.

use std::net::SocketAddr;
use std::time::Duration;

use kiln_server::{ServerConfig, ShutdownHandle};

use crate::model::Loaded;

pub struct Api {
    pub addr: SocketAddr,
    shutdown: ShutdownHandle,
    runtime: tokio::runtime::Runtime,
}

impl Api {
    /// Serves `model` on `127.0.0.1:port` (0: any free port), to web pages of any origin too
    /// where `cors`.
    pub fn start(model: &Loaded, port: u16, cors: bool) -> anyhow::Result<Api> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kiln-api")
            .enable_all()
            .build()?;
        let config = ServerConfig {
            port,
            served_model_name: model.info.name.clone(),
            shutdown_timeout: Duration::from_secs(2),
            allowed_origins: match cors {
                true => vec!["*".into()],
                false => Vec::new(),
            },
            ..ServerConfig::default()
        };
        let server = runtime.block_on(kiln_server::start_on(
            config,
            model.frontend.clone(),
            model.engine.clone(),
        ))?;
        let (addr, shutdown) = (server.addr, server.shutdown_handle());
        runtime.spawn(server.wait());
        Ok(Api {
            addr,
            shutdown,
            runtime,
        })
    }

    /// Stops serving: open connections are cut and their requests aborted.
    pub fn stop(self) {
        self.shutdown.shutdown();
        self.runtime.shutdown_background();
    }
}
