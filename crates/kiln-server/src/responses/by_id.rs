//! The routes on one response by its id: `GET` (the response, or a background response's
//! events again as a stream), `DELETE`, `POST .../cancel`, `GET .../input_items`.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::sse::sse_typed;
use crate::state::Shared;

/// `GET /v1/responses/{id}`: the response as it stands (a background response while it
/// runs too); with `stream=true`, a background response's events after `starting_after`
/// (from the first without it), then the live ones until it ends.
pub async fn get(
    State(st): State<Shared>,
    Path(id): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    let (mut streamed, mut after) = (false, None);
    for (k, v) in &q {
        match k.as_str() {
            "stream" => {
                streamed = v
                    .parse()
                    .map_err(|_| ApiError::bad_param("stream", "stream is true or false"))?
            }
            "starting_after" => {
                after = Some(v.parse::<u64>().map_err(|_| {
                    ApiError::bad_param(
                        "starting_after",
                        "starting_after is an event's sequence_number",
                    )
                })?)
            }
            other => {
                return Err(ApiError::bad_param(
                    other,
                    format!("`{other}` is not supported here (stream, starting_after)"),
                ));
            }
        }
    }
    if after.is_some() && !streamed {
        return Err(ApiError::bad_param(
            "starting_after",
            "starting_after goes with stream=true",
        ));
    }
    if let Some(bg) = st.responses.background(&id) {
        return Ok(match streamed {
            true => sse_typed(bg.follow(after)),
            false => axum::Json(bg.response()).into_response(),
        });
    }
    let stored = st.responses.get(&id).ok_or_else(|| not_stored(&id))?;
    if streamed {
        return Err(ApiError::bad_param(
            "stream",
            "only a background response's events are kept to stream again",
        ));
    }
    Ok(axum::Json(stored.response.clone()).into_response())
}

/// `DELETE /v1/responses/{id}`: forgets it (a background response still running is
/// cancelled first).
pub async fn delete(
    State(st): State<Shared>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if let Some(bg) = st.responses.background(&id) {
        bg.cancel().await;
    }
    match st.responses.remove(&id) {
        true => Ok(
            axum::Json(json!({"id": id, "object": "response.deleted", "deleted": true}))
                .into_response(),
        ),
        false => Err(not_stored(&id)),
    }
}

/// `POST /v1/responses/{id}/cancel`: stops a background response and returns it
/// `cancelled`; one that has already ended is returned as it ended.
pub async fn cancel(
    State(st): State<Shared>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if let Some(bg) = st.responses.background(&id) {
        return Ok(axum::Json(bg.cancel().await).into_response());
    }
    match st.responses.get(&id) {
        Some(_) => Err(ApiError::bad_param(
            "response_id",
            "only a response created with background: true can be cancelled",
        )),
        None => Err(not_stored(&id)),
    }
}

/// `GET /v1/responses/{id}/input_items`: the items the response was generated from (the
/// conversation it continued, then its own input), newest first unless `order=asc`, `limit`
/// (1 to 100, 20 by default) at a time, from past the item `after` names.
pub async fn input_items(
    State(st): State<Shared>,
    Path(id): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    let mut list = match (st.responses.get(&id), st.responses.background(&id)) {
        (Some(stored), _) => {
            let mut list = stored.conversation();
            list.truncate(list.len() - stored.response["output"].as_array().map_or(0, Vec::len));
            list
        }
        (None, Some(bg)) => {
            let mut list = bg
                .previous
                .as_ref()
                .map(|p| p.conversation())
                .unwrap_or_default();
            list.extend(bg.input.iter().cloned());
            list
        }
        (None, None) => return Err(not_stored(&id)),
    };
    let (mut limit, mut after) = (20, None);
    for (k, v) in &q {
        match k.as_str() {
            "limit" => {
                limit = v
                    .parse()
                    .ok()
                    .filter(|l| (1..=100).contains(l))
                    .ok_or_else(|| {
                        ApiError::bad_param("limit", "limit is a whole number from 1 to 100")
                    })?
            }
            "order" if v == "asc" => {}
            "order" if v == "desc" => list.reverse(),
            "order" => return Err(ApiError::bad_param("order", "order is asc or desc")),
            "after" => after = Some(v),
            other => {
                return Err(ApiError::bad_param(
                    other,
                    format!("`{other}` is not supported here (limit, order, after)"),
                ));
            }
        }
    }
    if !q.contains_key("order") {
        list.reverse();
    }
    let start = match after {
        None => 0,
        Some(a) => {
            1 + list
                .iter()
                .position(|i| i["id"] == a.as_str())
                .ok_or_else(|| {
                    ApiError::bad_param("after", format!("no input item `{a}` in this response"))
                })?
        }
    };
    let page: Vec<Value> = list.iter().skip(start).take(limit).cloned().collect();
    Ok(axum::Json(json!({
        "object": "list",
        "first_id": page.first().map(|i| i["id"].clone()),
        "last_id": page.last().map(|i| i["id"].clone()),
        "has_more": start + page.len() < list.len(),
        "data": page,
    }))
    .into_response())
}

fn not_stored(id: &str) -> ApiError {
    ApiError::not_found(format!("No response with id `{id}` is stored."))
}
