//! `kiln info`: the adapter, and the model's shape and memory needs.

use kiln_gpu::GpuContext;

#[derive(clap::Args)]
pub struct Args {
    /// Model folder, GGUF file or Hugging Face repo id.
    #[arg(long)]
    model: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let ctx = pollster::block_on(GpuContext::new())?;
    let i = &ctx.info;
    println!("adapter:   {}", i.name);
    println!("backend:   {:?} ({:?})", i.backend, i.device_type);
    println!("driver:    {} {}", i.driver, i.driver_info);
    println!(
        "features:  shader-f16 {}",
        if ctx.features.contains(wgpu::Features::SHADER_F16) {
            "yes"
        } else {
            "no (f16 weights packed in u32)"
        }
    );
    println!(
        "matrices:  {}",
        match ctx.cooperative_matrix {
            Some(side) => format!(
                "cooperative {side}x{side}, f16 in, f32 accumulated (products of many rows on \
                 them with KILN_COOPERATIVE_MATRIX=1)"
            ),
            None => "no cooperative matrices".to_string(),
        }
    );
    let l = &ctx.limits;
    println!(
        "limits:    storage binding {} MiB, buffer {} MiB, workgroup storage {} KiB, invocations {}",
        l.max_storage_buffer_binding_size as u64 >> 20,
        l.max_buffer_size >> 20,
        l.max_compute_workgroup_storage_size >> 10,
        l.max_compute_invocations_per_workgroup
    );
    if args.model.is_some() || std::path::Path::new(crate::model_path::DEFAULT_MODEL).exists() {
        let model = crate::model_path::load(args.model.as_deref())?;
        let c = &model.config;
        println!(
            "model:     {} ({}: {})",
            model.source,
            c.architecture.gguf_name(),
            c.features().join(", ")
        );
        println!(
            "shape:     {} layers, hidden {}, intermediate {}, {} heads / {} KV heads of {}, vocab {}, context {}",
            c.num_layers,
            c.hidden_size,
            c.intermediate_size,
            c.num_heads,
            c.num_kv_heads,
            c.head_dim,
            c.vocab_size,
            c.max_position_embeddings
        );
        let sampling = c.generation.describe();
        println!(
            "sampling:  {}",
            if sampling.is_empty() {
                "the model sets no defaults (kiln's apply)".to_string()
            } else {
                format!("the model's defaults: {}", sampling.join(", "))
            }
        );
        let template = model.chat_template.as_ref();
        println!(
            "chat:      {}; tool calls in {}; reasoning {}",
            match template {
                Some(_) => "the model's chat template",
                None => "no chat template (ChatML is used)",
            },
            kiln_frontend::tools::ToolFormat::detect(template, &model.tokenizer).describe(),
            match kiln_frontend::ReasoningFormat::detect(template) {
                kiln_frontend::ReasoningFormat::Think => "in <think> blocks, set apart",
                kiln_frontend::ReasoningFormat::Harmony => {
                    "in gpt-oss's analysis channel, set apart (harmony messages)"
                }
                kiln_frontend::ReasoningFormat::None => "not set apart (no <think> tags)",
            }
        );
        let params = c.param_count() as f64;
        let (file_bytes, types) = model.weights.stored_bytes();
        let types: Vec<String> = types.iter().map(|(t, n)| format!("{n} {t}")).collect();
        let (gpu_bytes, widened) =
            kiln_gpu::gpu_weight_bytes(&model.weights, kiln_gpu::WeightStorage::Quantized)?;
        let widened = if widened.is_empty() {
            "quantized types kept as they are".to_string()
        } else {
            format!("{} widened to f16", widened.join(", "))
        };
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "weights:   {:.1} MiB of tensors in the file ({}); {:.1} MiB on the GPU ({:.2}x; {widened})",
            mib(file_bytes),
            types.join(", "),
            mib(gpu_bytes),
            gpu_bytes as f64 / file_bytes.max(1) as f64
        );
        let layout = |d| kiln_gpu::KvLayout::for_model(c, d);
        let kv_per_token = layout(kiln_gpu::KvDtype::F16).bytes_per_token();
        let others: Vec<String> = [kiln_gpu::KvDtype::Q8, kiln_gpu::KvDtype::Fp8]
            .into_iter()
            .filter(|&d| layout(d).unfit().is_none())
            .map(|d| {
                format!(
                    "{:.1} KiB as {d}",
                    layout(d).bytes_per_token() as f64 / 1024.0
                )
            })
            .collect();
        println!(
            "memory:    {:.1} M parameters, {:.1} KiB of f16 KV cache per token ({:.0} MiB for a full context; twice that as f32; {})",
            params / 1e6,
            kv_per_token as f64 / 1024.0,
            (kv_per_token * c.max_position_embeddings as u64) as f64 / (1 << 20) as f64,
            others.join(", ")
        );
    }
    Ok(())
}
