// The step's counts and the attention's parameters, as ops/attention.rs writes them for every
// attention kernel (bindings 0 and 1); appended to attention.wgsl and the row-wise two.

struct Step { num_tokens: u32, num_seqs: u32, num_samples: u32, pad: u32 }
struct Params {
    num_heads: u32,
    num_kv_heads: u32,
    head_dim: u32,
    qkv_stride: u32,  // row width of qkv
    scale: f32,       // 1 / sqrt(head_dim)
    block_size: u32,
    window: u32,      // sliding window: the latest keys each token sees (0: all)
    tq: u32,          // tokens per query tile (attention.wgsl's; ops/attention.rs: query_tile)
    sinks: array<vec4<f32>, 32>, // each query head's sink logit (-1e30 without: attention_sink.wgsl)
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
