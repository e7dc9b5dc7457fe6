// IQ4_NL's and IQ4_XS's sixteen levels (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25,
// 38, 53, 69, 89, 113), a signed byte each, four to a word, for the format files that look
// nibbles up in them (weights_iq4_nl.wgsl and weights_iq4_xs.wgsl, to each of which the
// loader appends this file). A nibble's word is picked by selects and its byte shifted out,
// where indexing an array would make each lane load from memory of its own.
const IQ4_WORDS = array<u32, 4>(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);

fn levels4(word: u32, sh: u32) -> vec4<f32> {
    let q = (vec4<u32>(word) >> vec4<u32>(sh, sh + 8u, sh + 16u, sh + 24u)) & vec4<u32>(15u);
    let mid = (q & vec4<u32>(4u)) != vec4<u32>(0u);
    let low = select(vec4<u32>(IQ4_WORDS[0]), vec4<u32>(IQ4_WORDS[1]), mid);
    let high = select(vec4<u32>(IQ4_WORDS[2]), vec4<u32>(IQ4_WORDS[3]), mid);
    let words = select(low, high, q >= vec4<u32>(8u));
    // The nibble's byte moved to the top, then shifted down with its sign.
    let top = words << ((vec4<u32>(3u) - (q & vec4<u32>(3u))) * 8u);
    return vec4<f32>(bitcast<vec4<i32>>(top) >> vec4<u32>(24u));
}
