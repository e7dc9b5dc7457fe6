//! [`WebEngine::step`]: one forward pass for every active generation, its commands (starts,
//! stops) applied first and its events handed to their callbacks once the engine is free.

use super::*;

#[wasm_bindgen]
impl WebEngine {
    /// Runs one step (one forward pass for every active generation) and resolves to the array
    /// of its events. Rejects if a step is already in flight or the GPU fails.
    // The RefCell borrow held across the step's await is the guard against a second step
    // starting meanwhile (the page is single-threaded; `try_borrow_mut` refuses it).
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn step(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        let pending = self.pending.clone();
        let frontend = self.frontend.clone();
        let sizes = self.sizes.clone();
        let loras = self.loras.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let events = {
                let Ok(mut guard) = inner.try_borrow_mut() else {
                    return Err(err("a step is already running; await it before the next"));
                };
                let Inner { engine, chats } = &mut *guard;
                let mut events = Vec::new();
                let commands: Vec<Command> = pending.borrow_mut().drain(..).collect();
                for c in commands {
                    match c {
                        Command::Start(start) => {
                            let Start {
                                mut request,
                                chat,
                                constraint,
                                lora,
                            } = *start;
                            let id = request.id;
                            let added = match lora.map(|n| (engine.lora_ref(&n), n)) {
                                Some((None, n)) => Err(format!("LoRA adapter `{n}` was unloaded")),
                                Some((r, _)) => {
                                    request.lora = r;
                                    Ok(())
                                }
                                None => Ok(()),
                            };
                            let added = added.and_then(|()| {
                                match constraint {
                                    Some(c) => engine.add_constrained_request(request, c),
                                    None => engine.add_request(request),
                                }
                                .map_err(|e| e.to_string())
                            });
                            match added {
                                Ok(()) => {
                                    chats.insert(id, chat);
                                }
                                Err(e) => events.push(Event {
                                    id,
                                    finished: Some(format!("error: {e}")),
                                    callback: chat.callback,
                                    ..Event::default()
                                }),
                            }
                        }
                        Command::Stop(id) => {
                            if let Some(u) = engine.abort(id) {
                                handle(u, chats, engine, &frontend, &mut events);
                            }
                        }
                        c => lora::apply(engine, &loras, Some(c)),
                    }
                }
                let updates = engine.step().await;
                let updates = match updates {
                    Ok(u) => u,
                    Err(e) => {
                        let lost = DEVICE_LOST.lock().unwrap().clone();
                        return Err(err(match lost {
                            Some(l) => format!("the GPU device was lost ({l}): {e}"),
                            None => format!("step failed: {e}"),
                        }));
                    }
                };
                if let Some(e) = GPU_ERROR.lock().unwrap().clone() {
                    return Err(err(format!("GPU error: {e}")));
                }
                let stats = engine.stats();
                let guesses = (stats.spec_draft_tokens, stats.spec_accepted_tokens);
                sizes.set(Sizes {
                    guesses,
                    ..sizes.get()
                });
                let first = events.len();
                for u in updates {
                    handle(u, chats, engine, &frontend, &mut events);
                }
                if !loras.borrow().unloading.is_empty() {
                    lora::apply(engine, &loras, None);
                }
                // A generation failed by its output constraint ends with the error.
                let failures: HashMap<u64, String> = engine.take_failures().into_iter().collect();
                for e in &mut events[first..] {
                    if let (Some(why), Some(_)) = (failures.get(&e.id), &e.finished) {
                        e.finished = Some(format!("error: {why}"));
                    }
                }
                events
            };
            // The engine is released: callbacks may call start/stop.
            let out = Array::new();
            for e in &events {
                let obj = e.to_js();
                if let Some(f) = &e.callback
                    && let Err(x) = f.call1(&JsValue::NULL, &obj)
                {
                    web_log(&format!("on_token callback threw: {x:?}"));
                }
                out.push(&obj);
            }
            Ok(out.into())
        })
    }
}
