//! vLLM's `POST /v1/load_lora_adapter` and `POST /v1/unload_lora_adapter`: LoRA adapters
//! loaded and unloaded while the server runs, where it was started with room for them
//! (`--allow-runtime-lora-updating`). The folder is read and checked against the model here,
//! off the engine thread; the engine thread registers it, and writes it into one of the
//! `--max-loras` slots before a step whose requests need it (any number may be loaded; beyond
//! `--max-cpu-loras`, those unused lately let go of their values until a request needs them).

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use kiln_model::LoraAdapter;
use serde::Deserialize;

use crate::error::{ApiError, ApiJson};
use crate::state::Shared;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadRequest {
    pub lora_name: String,
    pub lora_path: String,
    /// vLLM's field: put the adapter in the place of the loaded one of its name (new weights
    /// under the same name), refused while a request runs through that one.
    #[serde(default)]
    pub load_inplace: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnloadRequest {
    pub lora_name: String,
    /// vLLM's field, which names nothing kiln keeps: accepted only as 0.
    #[serde(default)]
    pub lora_int_id: Option<i64>,
}

pub async fn load(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<LoadRequest>,
) -> Result<Response, ApiError> {
    let name = req.lora_name;
    if name.is_empty() || st.serves(&name) {
        return Err(ApiError::bad_param(
            "lora_name",
            format!("`{name}` cannot name an adapter: it is empty or a name of the served model"),
        ));
    }
    let replace = st.engine.lora.find(&name).is_some();
    if replace && !req.load_inplace {
        return Err(ApiError::bad_param(
            "lora_name",
            format!("a LoRA adapter named `{name}` is already loaded (load_inplace replaces it)"),
        ));
    }
    let (path, model) = (req.lora_path, st.engine.info.model.clone());
    let read = {
        let name = name.clone();
        tokio::task::spawn_blocking(move || LoraAdapter::load(&name, path.as_ref(), &model))
    };
    let adapter = (read.await)
        .map_err(|e| ApiError::internal(format!("reading the adapter: {e}")))?
        .map_err(|e| ApiError::bad_param("lora_path", e.to_string()))?;
    let adapter = Arc::new(adapter);
    let loaded = match replace {
        true => st.engine.replace_lora(adapter).await,
        false => st.engine.load_lora(adapter).await,
    };
    let id =
        loaded.map_err(|e| ApiError::bad_request(format!("loading LoRA adapter `{name}`: {e}")))?;
    tracing::info!("LoRA adapter `{name}` has id {id}");
    Ok(format!("Success: LoRA adapter '{name}' added successfully.").into_response())
}

pub async fn unload(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<UnloadRequest>,
) -> Result<Response, ApiError> {
    if req.lora_int_id.is_some_and(|id| id != 0) {
        return Err(ApiError::bad_param(
            "lora_int_id",
            "kiln names adapters by lora_name only",
        ));
    }
    let name = req.lora_name;
    if st.engine.lora.find(&name).is_none() {
        return Err(ApiError::not_found(format!(
            "The lora adapter '{name}' cannot be found."
        )));
    }
    (st.engine.unload_lora(name.clone()).await)
        .map_err(|e| ApiError::bad_request(format!("unloading LoRA adapter `{name}`: {e}")))?;
    Ok(format!("Success: LoRA adapter '{name}' removed successfully.").into_response())
}
