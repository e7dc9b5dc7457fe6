//! Writes the tiny Hugging Face folders of `kiln_model::testing::transformers_cases` into
//! `OUT/<case>/`, for `scripts/transformers_reference.py` to run through transformers.
//!
//!     cargo run -p kiln-model --example transformers_cases -- OUT

fn main() {
    let out = std::env::args()
        .nth(1)
        .expect("usage: transformers_cases OUT");
    for (name, cfg) in kiln_model::testing::transformers_cases() {
        let dir = std::path::Path::new(&out).join(name);
        kiln_model::testing::write_transformers_case(&dir, &cfg).expect("write");
        println!("{}", dir.display());
    }
}
