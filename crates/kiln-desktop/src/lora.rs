//! LoRA adapters in the open model: read from a PEFT folder or a GGUF adapter file and loaded
//! into the engine (which has room for them when the "LoRA adapter slots" setting was above 0
//! as the model opened: any number may be loaded, as many as the slots running at once), or
//! unloaded. Both run off the window's thread;
//! the model panel lists what is loaded, and a failure shows as a notice. A chat picks its
//! adapter by name in its settings.

use std::path::PathBuf;
use std::sync::Arc;

use kiln_model::LoraAdapter;

use crate::app::{DesktopApp, ModelState};

impl DesktopApp {
    /// Reads the adapter at `path` (named after its file or folder) and loads it into the
    /// open model.
    pub fn load_lora(&mut self, path: PathBuf) {
        let ModelState::Ready(m) = &self.model else {
            return;
        };
        let name = (path.file_stem())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let (engine, config) = (m.engine.clone(), m.engine.info.model.clone());
        self.lora_job(move || {
            let adapter = LoraAdapter::load(&name, &path, &config).map_err(|e| e.to_string())?;
            pollster::block_on(engine.load_lora(Arc::new(adapter)))
                .map(|_| ())
                .map_err(|e| format!("LoRA adapter `{name}`: {e}"))
        });
    }

    /// Unloads adapter `name` (refused while a reply runs through it).
    pub fn unload_lora(&mut self, name: String) {
        let ModelState::Ready(m) = &self.model else {
            return;
        };
        let engine = m.engine.clone();
        self.lora_job(move || {
            pollster::block_on(engine.unload_lora(name.clone()))
                .map(|_| ())
                .map_err(|e| format!("unloading LoRA adapter `{name}`: {e}"))
        });
    }

    /// Whether a load or unload is on its way.
    pub fn lora_busy(&self) -> bool {
        self.lora_job.is_some()
    }

    fn lora_job(&mut self, job: impl FnOnce() -> Result<(), String> + Send + 'static) {
        let (tx, rx) = flume::bounded(1);
        let repaint = self.repaint.clone();
        std::thread::spawn(move || {
            let _ = tx.send(job());
            repaint.request_repaint();
        });
        self.lora_job = Some(rx);
    }

    /// Takes the answer of a load or unload: a failure becomes a notice.
    pub(crate) fn poll_lora(&mut self) {
        if let Some(answer) = self.lora_job.as_ref().and_then(|rx| rx.try_recv().ok()) {
            self.lora_job = None;
            if let Err(e) = answer {
                self.notices.push(e);
            }
        }
    }
}
