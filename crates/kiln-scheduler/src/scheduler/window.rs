//! Sliding windows on every layer: the blocks a request has left behind go back to the pool.
//!
//! With a window of `w` positions on every layer, the token at position `p` reads the keys of
//! positions `p + 1 - w ..= p` only (both attention kernel families), so once a request has
//! `n` tokens in the cache, no token still to come reads a position before `n + 1 - w`. Each
//! block wholly before that is given back as soon as the request passes it: its table entry
//! becomes [`NO_BLOCK`], which no kernel reads, and the block joins the free queue (a block in
//! the prefix cache stays cached there, for the next request with the same prefix, until it is
//! evicted). So a long Mistral conversation holds about `w / BLOCK_SIZE + 2` blocks, not one
//! per 16 tokens of its context.
//!
//! A model with any global layer (Gemma 3: one layer in six) keeps every block, since its
//! global layers read the whole context and one block table serves every layer; freeing the
//! sliding layers' share would need a block table per kind of layer.

use kiln_core::{BLOCK_SIZE, NO_BLOCK};

use crate::kv_cache::KvCache;
use crate::request::RequestState;

/// Blocks wholly before the window of the token at position `next` (the first not yet
/// computed): no token from there on reads them. 0 without a window.
pub(super) fn blocks_behind(window: Option<usize>, next: usize) -> usize {
    window.map_or(0, |w| (next + 1).saturating_sub(w) / BLOCK_SIZE)
}

/// Gives back the request's blocks that lie wholly before the window of its next token;
/// returns how many. O(blocks given back).
pub(super) fn release_behind_window(
    kv: &mut KvCache,
    st: &mut RequestState,
    window: usize,
) -> usize {
    let behind = blocks_behind(Some(window), st.num_computed).min(st.blocks.len());
    let mut released = 0;
    while st.num_released < behind {
        let b = std::mem::replace(&mut st.blocks[st.num_released], NO_BLOCK);
        kv.release(&[b]);
        st.num_released += 1;
        released += 1;
    }
    released
}

/// Checks that a running request's given-back entries are exactly its first
/// `num_released`, all behind the window of its next token.
pub(super) fn check(id: u64, st: &RequestState, window: Option<usize>) -> Result<(), String> {
    let given_back = st.blocks.iter().take_while(|&&b| b == NO_BLOCK).count();
    if given_back != st.num_released || st.blocks[given_back..].contains(&NO_BLOCK) {
        return Err(format!(
            "request {id}: {} entries given back, table {:?}",
            st.num_released, st.blocks
        ));
    }
    if st.num_released > blocks_behind(window, st.num_computed) {
        return Err(format!(
            "request {id}: {} blocks given back, but {} tokens computed within a window of \
             {window:?}",
            st.num_released, st.num_computed
        ));
    }
    Ok(())
}
