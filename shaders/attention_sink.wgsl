// Query head h's sink: one more logit in its softmax, weighing no value (gpt-oss's; -1e30,
// whose share is 0, where the model has none). Read from the kernel's parameters, `p.sinks`
// (four heads a vector, ops/attention.rs). Appended to the attention kernels and their reduce.
fn sink(h: u32) -> f32 {
    return p.sinks[h / 4u][h % 4u];
}
