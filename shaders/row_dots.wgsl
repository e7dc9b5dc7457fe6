// OUTS weight rows against one row of x, for the row-wise products that give an invocation
// OUTS outputs (matvec_rowwise.wgsl and moe_matvec.wgsl, to each of which the loader appends
// this file; each declares x, gain and OUTS). The rows are walked 8 weights at a time,
// dequantized in registers by the format's w_octet, so every load of x (and of the gain)
// feeds all OUTS of them. With `norm`, x is RMS-normalized on the way: its gain multiplies x
// as it is loaded, and the sums are scaled by 1 / rms(x) at the end.
fn row_dots(wrow: array<u32, OUTS>, xbase: u32, norm: bool) -> array<f32, OUTS> {
    var acc: array<f32, OUTS>;
    for (var o = 0u; o < OUTS; o++) {
        acc[o] = 0.0;
    }
    var ss = 0.0;
    for (var c = 0u; c < p.k / 8u; c++) {
        var x0 = x[xbase + 2u * c];
        var x1 = x[xbase + 2u * c + 1u];
        if (norm) {
            ss += dot(x0, x0) + dot(x1, x1);
            x0 *= gain[2u * c];
            x1 *= gain[2u * c + 1u];
        }
        for (var o = 0u; o < OUTS; o++) {
            let q = w_octet(wrow[o], c, p.k, p.so);
            acc[o] += dot(x0, q.a) + dot(x1, q.b);
        }
    }
    if (norm) {
        let s = inverseSqrt(ss / f32(p.k) + p.eps);
        for (var o = 0u; o < OUTS; o++) {
            acc[o] *= s;
        }
    }
    return acc;
}
