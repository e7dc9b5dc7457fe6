// Eight consecutive values of a row, as two vec4s: what every weight format's `w_octet`
// returns (the loader appends this file after the format file) and what lane_octet.wgsl
// gathers of x.
struct Octet { a: vec4<f32>, b: vec4<f32> }
