//! The families whose Hugging Face folders name their tensors their own way (GPT-NeoX's,
//! Falcon's): the table between their names and kiln's, read either way. The loader renames
//! such a folder's tensors to kiln's names; its messages give the folder's.

/// A family's names of its tensors, and kiln's.
pub(crate) struct NativeNames {
    /// The prefix of their layers' tensors (`gpt_neox.layers.`), before the layer's number.
    pub layers: &'static str,
    /// A layer's tensors, after the prefix and the layer's number: theirs, then kiln's (after
    /// `model.layers.N.`).
    pub layer: &'static [(&'static str, &'static str)],
    /// The tensors outside the layers: theirs, then kiln's.
    pub global: &'static [(&'static str, &'static str)],
}

impl NativeNames {
    /// Kiln's name of the tensor the folder names `hf`, if it is one of the model's weights.
    pub(crate) fn kiln_name(&self, hf: &str) -> Option<String> {
        self.rename(hf, (self.layers, "model.layers."), |(h, k)| (h, k))
    }

    /// The folder's name of the tensor kiln names `kiln` (the inverse of [`Self::kiln_name`]).
    pub(crate) fn hf_name(&self, kiln: &str) -> Option<String> {
        self.rename(kiln, ("model.layers.", self.layers), |(h, k)| (k, h))
    }

    /// `name` renamed by the tables read one way by `pick` (`(from, to)`), the layers' prefix
    /// `from` becoming `to`.
    fn rename(
        &self,
        name: &str,
        (from, to): (&str, &str),
        pick: impl Fn((&'static str, &'static str)) -> (&'static str, &'static str),
    ) -> Option<String> {
        let (base, suffix) = name.rsplit_once('.')?;
        let find = |table: &[(&'static str, &'static str)], part: &str| {
            (table.iter().map(|&p| pick(p)))
                .find(|(a, _)| *a == part)
                .map(|(_, b)| b)
        };
        if let Some(rest) = base.strip_prefix(from) {
            let (i, part) = rest.split_once('.')?;
            return Some(format!("{to}{i}.{}.{suffix}", find(self.layer, part)?));
        }
        Some(format!("{}.{suffix}", find(self.global, base)?))
    }
}
