//! The decoder families kiln runs and what sets each apart at the level of the whole
//! model (its GGUF name, its norms, how its files store q and k).

/// The decoder families kiln runs. Mistral loads as `Llama` (with its sliding window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    /// Llama with q/k/v biases.
    Qwen2,
    /// Llama with an RMSNorm over each head of q and of k before the rotary embedding
    /// (`q_norm`, `k_norm`, one gain of `head_dim` each), no biases.
    Qwen3,
    /// Llama plus norms after attention and MLP, a GELU MLP, scaled embeddings, sliding-window
    /// layers alternating with global ones and soft-capped attention scores and logits
    /// (`models::gemma2`).
    Gemma2,
    /// Gemma 2 with Qwen3's per-head q/k norms instead of soft caps, five sliding layers to
    /// a global one, and a RoPE base of its own on the sliding layers (`models::gemma3`).
    Gemma3,
    /// Llama with q/k/v and gate/up fused into one tensor each, and LongRoPE (`models::phi3`).
    Phi3,
    /// Llama whose every fourth layer applies no rotary embedding (NoPE; `models::smollm3`).
    SmolLM3,
    /// Llama with four scalar multipliers: on the embeddings, the attention scores, each
    /// sub-layer's output into the residual stream and the logits (`models::granite`).
    Granite,
    /// Cohere's Command-R (Command-R, Command-R+, Aya 23 and Aya Expanse): one LayerNorm (no
    /// bias) before attention and the MLP side by side, both added to the residual stream;
    /// rotary pairs side by side in q and k; logits multiplied by a scale; Command-R+'s
    /// per-head q/k LayerNorms (`models::cohere`).
    Cohere,
    /// Cohere's Command R7B and Command A: Command-R's layer, three layers sliding to one
    /// global that applies no RoPE (`models::cohere`).
    Cohere2,
    /// StableLM (StableLM 2 1.6B and 12B, StableLM 3B 4E1T, Zephyr 3B, StableCode 3B):
    /// Llama's layer with LayerNorms (biases included) in place of its RMSNorms, q/k/v biases
    /// where the config says, and a rotary embedding on the first quarter of each head; the
    /// 12B's attention and MLP side by side and its per-head q/k LayerNorms
    /// (`models::stablelm`).
    StableLm,
    /// Nemotron (Nemotron-4 Minitron 4B and 8B, Nemotron-Mini 4B): StableLM's LayerNorms with
    /// biases, their gains stored minus one in Hugging Face files, and Arcee's MLP without a
    /// gate (`down(relu(up x)^2)`); a rotary embedding on half of each head
    /// (`models::nemotron`).
    Nemotron,
    /// StarCoder2 (3B, 7B, 15B): StableLM's LayerNorms with biases, biases on every projection
    /// where the config says (`use_bias`), a MLP without a gate activated by GELU, and a
    /// sliding window on every layer where it has one (`models::starcoder2`).
    Starcoder2,
    /// Phi-2 and Phi-1.5: one LayerNorm with a bias before attention and a MLP without a
    /// gate (GELU) side by side, as Command-R's; biases on every projection, the LM head's
    /// too; a rotary embedding on the first 40% of each head (`models::phi2`).
    Phi2,
    /// GPT-NeoX (Pythia, GPT-NeoX-20B, Dolly v2, RedPajama-INCITE, StableLM-Alpha): two
    /// LayerNorms with biases, attention and a MLP without a gate (exact GELU) side by side on
    /// them where the config says (`use_parallel_residual`), biases on every projection, q/k/v
    /// fused with each head's three stored together, and a rotary embedding on the first
    /// quarter of each head (`models::gpt_neox`).
    GptNeox,
    /// Falcon (7B, 40B, 180B, Falcon 2 11B): GPT-NeoX's layer always side by side, on one
    /// LayerNorm (7B's) or two (`ln_attn`, `ln_mlp`: the larger ones'), biases where the config
    /// says (`bias`), multi-query or grouped attention with q/k/v fused, each group's queries,
    /// key and value together in Hugging Face folders, every dimension turning
    /// (`models::falcon`).
    Falcon,
    /// GPT-2 (and DistilGPT2, Cerebras-GPT): a learned embedding of each position added to the
    /// token's, in place of a rotary embedding; two LayerNorms with biases, attention (q, k
    /// and v one product) then a MLP without a gate (GELU, tanh), one after the other, biases
    /// on every product (`models::gpt2`). Hugging Face folders store its products transposed
    /// (`Conv1D`: `[in, out]`), which the loader turns back.
    Gpt2,
    /// StarCoder (GPT-BigCode: StarCoder, StarCoderBase, SantaCoder's successors, WizardCoder,
    /// Granite Code's first release): GPT-2's layer with multi-query attention (one KV head)
    /// and products stored as kiln runs them (`models::gpt2`).
    Starcoder,
    /// BLOOM (and BLOOMZ): a LayerNorm of the embeddings, then GPT-2's layer (attention, then
    /// a GELU (tanh) MLP, each on a LayerNorm with biases, biases on every product) with
    /// ALiBi's biases on the attention scores in place of any position embedding; q, k and v
    /// one product, each head's three together in Hugging Face folders (`models::bloom`).
    Bloom,
    /// MPT (MPT-7B, MPT-30B and their chat and instruct models): GPT-2's layer without any
    /// bias (LayerNorms without them too), an exact-GELU MLP, and ALiBi's biases on the
    /// attention scores in place of any position embedding (`models::mpt`).
    Mpt,
    /// GPT-J (GPT-J-6B, GPT4All-J, Pygmalion 6B): Phi-2's layer (one LayerNorm with a bias,
    /// attention and a GELU (tanh) MLP without a gate side by side) with q, k, v and the
    /// attention's output without biases, and a rotary embedding on the first `rotary_dim`
    /// dimensions of each head, its pairs side by side in q and k (`models::gptj`).
    GptJ,
    /// InternLM2 and InternLM2.5 (1.8B, 7B, 20B; the language model of InternVL 2 and 2.5):
    /// Llama's layer under its own names, q, k and v one product in its Hugging Face folders
    /// (`wqkv`, each KV group's queries, key and value together), apart in GGUF files
    /// (`models::internlm2`).
    InternLm2,
    /// OLMo (OLMo 1B and 7B; not OLMo 1.7, whose q, k and v are clipped): Llama's attention
    /// and gated MLP, each on a LayerNorm
    /// without gain or bias (`models::olmo`).
    Olmo,
    /// EXAONE 3.0 and 3.5 (2.4B, 7.8B, 32B; EXAONE Deep): Llama's layer under GPT-2-like names
    /// (`transformer.h.N.attn.attention.q_proj`, `mlp.c_fc_0`, ...), its rotary halves as
    /// Hugging Face's Llama keeps them in both kinds of file (`models::exaone`).
    Exaone,
    /// MiniCPM (1B, 2B, MiniCPM4): Granite's layer and multipliers, given by its config as
    /// `scale_emb`, `scale_depth` and `dim_model_base`, with the usual attention scale
    /// (`models::minicpm`).
    MiniCpm,
    /// Llama whose sub-layers read the residual stream unnormalized and normalize their
    /// outputs into it, with q and k each RMS-normalized whole (`models::olmo2`); OLMo 3 is
    /// this with windows on three layers of four.
    Olmo2,
    /// OLMo 2's layer with per-head q/k norms; with a window, three sliding layers to a
    /// global one that applies no RoPE (`models::exaone4`).
    Exaone4,
    /// GLM-4 (0414): Llama's layer with norms on both sub-layers' outputs too, q/k/v biases,
    /// gate and up fused, and a rotary embedding on the first half of each head whose pairs
    /// are side by side in the weights (`models::glm4`).
    Glm4,
    /// ERNIE 4.5 (the dense models: 0.3B): Llama's layer, its rotary pairs side by side in
    /// the stored q and k rows (`models::ernie4_5`).
    Ernie45,
    /// Seed-OSS: Llama's layer with q/k/v biases (`models::seed_oss`).
    SeedOss,
    /// Arcee (AFM-4.5B): Llama's attention, its MLP not gated: `down(relu(up x)^2)`
    /// (`models::arcee`).
    Arcee,
    /// Hunyuan's dense models: Qwen3's per-head q/k norms, after the rotary embedding
    /// (`models::hunyuan_dense`).
    HunyuanDense,
    /// Qwen3's mixtures of experts (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): Qwen3's attention,
    /// and in place of its MLP a router choosing experts, each a gated MLP of its own, for
    /// every token ([`crate::Moe`]; `models::qwen3_moe`).
    Qwen3Moe,
    /// Mixtral: Mistral's attention and a mixture of experts in place of its MLP (GGUF: a
    /// `llama` file with experts; `models::mixtral`).
    Mixtral,
    /// OLMoE: Llama's layer with q and k each RMS-normalized whole (as OLMo 2's), and a
    /// mixture of experts in place of its MLP, their weights not renormalized
    /// (`models::olmoe`).
    Olmoe,
    /// Qwen2's mixtures of experts (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention
    /// (q/k/v biases), and besides the routed experts a shared expert every token runs, its
    /// output scaled by a gate of its own (`models::qwen2_moe`).
    Qwen2Moe,
    /// GLM-4.5 and 4.6 (and their Air models): Llama's attention with q/k/v biases and a
    /// rotary embedding on half of each head; the first layers dense, the others a mixture
    /// of experts routed by sigmoid scores with a bias for the choice, plus a shared expert
    /// (`models::glm4_moe`).
    Glm4Moe,
    /// ERNIE 4.5's mixtures of experts (ERNIE-4.5-21B-A3B, 300B-A47B): ERNIE 4.5's attention,
    /// the first layer dense, the others a mixture of experts chosen by softmax scores plus a
    /// bias of each expert's, and shared experts (`models::ernie4_5_moe`).
    Ernie45Moe,
    /// Granite's mixtures of experts (Granite 3.0/3.1 1B-A400M and 3B-A800M; with a shared
    /// expert, GraniteMoeShared): Granite's layer and multipliers, a mixture of experts in
    /// place of its MLP (`models::granite_moe`).
    GraniteMoe,
    /// dots.llm1: Qwen3's attention (per-head q/k norms) and GLM-4.5's mixture of experts
    /// (sigmoid scores with each expert's bias in the choice, shared experts, the first
    /// layer dense; `models::dots1`).
    Dots1,
    /// Hunyuan's mixture of experts (Hunyuan-A13B): Hunyuan's dense attention (q/k norms after
    /// the rotary embedding, an NTK alpha), experts chosen by their renormalized softmax, and a
    /// shared expert (`models::hunyuan_moe`).
    HunyuanMoe,
    /// gpt-oss (20B, 120B): biases on q, k, v and the attention's output, a learned sink
    /// logit per head in every softmax, every second layer sliding over 128 positions, and a
    /// mixture of experts whose router and experts have biases, chosen by their logits and
    /// weighted by the softmax over the chosen, with a clamped SwiGLU
    /// ([`crate::Activation::ClampedSwiglu`]; `models::gpt_oss`).
    GptOss,
}

impl Architecture {
    /// The name in GGUF's `general.architecture` (and Hugging Face's `model_type`).
    pub fn gguf_name(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
            Architecture::Gemma2 => "gemma2",
            Architecture::Gemma3 => "gemma3",
            Architecture::Phi3 => "phi3",
            Architecture::SmolLM3 => "smollm3",
            Architecture::Granite => "granite",
            Architecture::MiniCpm => "minicpm",
            Architecture::Cohere => "command-r",
            Architecture::Cohere2 => "cohere2",
            Architecture::StableLm => "stablelm",
            Architecture::Nemotron => "nemotron",
            Architecture::Starcoder2 => "starcoder2",
            Architecture::Phi2 => "phi2",
            Architecture::GptNeox => "gptneox",
            Architecture::Falcon => "falcon",
            Architecture::Gpt2 => "gpt2",
            Architecture::Starcoder => "starcoder",
            Architecture::Bloom => "bloom",
            Architecture::Mpt => "mpt",
            Architecture::GptJ => "gptj",
            Architecture::InternLm2 => "internlm2",
            Architecture::Olmo => "olmo",
            Architecture::Exaone => "exaone",
            Architecture::Olmo2 => "olmo2",
            Architecture::Exaone4 => "exaone4",
            Architecture::Glm4 => "glm4",
            Architecture::Ernie45 => "ernie4_5",
            Architecture::SeedOss => "seed_oss",
            Architecture::Arcee => "arcee",
            Architecture::HunyuanDense => "hunyuan-dense",
            Architecture::Qwen3Moe => "qwen3moe",
            Architecture::Mixtral => "llama",
            Architecture::Olmoe => "olmoe",
            Architecture::Qwen2Moe => "qwen2moe",
            Architecture::Glm4Moe => "glm4moe",
            Architecture::Ernie45Moe => "ernie4_5-moe",
            Architecture::GraniteMoe => "granitemoe",
            Architecture::Dots1 => "dots1",
            Architecture::HunyuanMoe => "hunyuan-moe",
            Architecture::GptOss => "gpt-oss",
        }
    }

    /// Whether llama.cpp's converter stores this architecture's q and k rows with each head's
    /// rotary halves interleaved (Llama's, and SmolLM3's, whose converter is Llama's).
    pub fn gguf_permutes_qk(self) -> bool {
        matches!(
            self,
            Architecture::Llama
                | Architecture::SmolLM3
                | Architecture::Granite
                | Architecture::GraniteMoe
                | Architecture::MiniCpm
                | Architecture::InternLm2
                | Architecture::Olmo
                | Architecture::Arcee
                | Architecture::Mixtral
        )
    }

    /// Whether the model's norms before its sub-layers and before the LM head are LayerNorms
    /// (mean subtracted, no bias: Cohere's) rather than RMSNorms.
    pub fn layer_norm(self) -> bool {
        matches!(
            self,
            Architecture::Cohere
                | Architecture::Cohere2
                | Architecture::StableLm
                | Architecture::Nemotron
                | Architecture::Starcoder2
                | Architecture::Phi2
                | Architecture::GptNeox
                | Architecture::Falcon
                | Architecture::Gpt2
                | Architecture::Starcoder
                | Architecture::Bloom
                | Architecture::Mpt
                | Architecture::GptJ
                | Architecture::Olmo
        )
    }

    /// Whether its LayerNorms (see [`Self::layer_norm`]) add a bias (StableLM's).
    pub fn norm_bias(self) -> bool {
        matches!(
            self,
            Architecture::StableLm
                | Architecture::Nemotron
                | Architecture::Starcoder2
                | Architecture::Phi2
                | Architecture::GptNeox
                | Architecture::Falcon
                | Architecture::Gpt2
                | Architecture::Starcoder
                | Architecture::Bloom
                | Architecture::GptJ
        )
    }

    /// Whether the family's code may turn only the first dimensions of each head (Phi-3's
    /// and GLM-4's `partial_rotary_factor`, StableLM's, Nemotron's, Phi-2's, GPT-NeoX's and
    /// GPT-J's); the others' turn all of them.
    pub fn partial_rotary(self) -> bool {
        matches!(
            self,
            Architecture::Phi3
                | Architecture::Glm4
                | Architecture::Glm4Moe
                | Architecture::StableLm
                | Architecture::Nemotron
                | Architecture::Phi2
                | Architecture::GptNeox
                | Architecture::GptJ
        )
    }

    /// Whether the family's q, k and v are always one product (GPT-NeoX's, Falcon's and
    /// BLOOM's `query_key_value`, by head or by group in Hugging Face folders, put in kiln's
    /// order on load; GPT-2's and StarCoder's `c_attn`; MPT's `Wqkv`).
    pub fn fused_qkv(self) -> bool {
        matches!(
            self,
            Architecture::GptNeox
                | Architecture::Falcon
                | Architecture::Gpt2
                | Architecture::Starcoder
                | Architecture::Bloom
                | Architecture::Mpt
        )
    }

    /// Whether a learned embedding of each position (`model.embed_positions`, one row a
    /// position of the context) is added to the token's, in place of any rotary embedding
    /// (GPT-2's and StarCoder's `wpe`).
    pub fn learned_positions(self) -> bool {
        matches!(self, Architecture::Gpt2 | Architecture::Starcoder)
    }

    /// Whether its LayerNorms have no gain, so that its files store none (OLMo's): the loader
    /// gives them gains of one.
    pub fn norms_without_gain(self) -> bool {
        self == Architecture::Olmo
    }

    /// Whether the embeddings go through a LayerNorm with a bias before the first layer
    /// (BLOOM's `word_embeddings_layernorm`: `model.embed_layernorm`).
    pub fn embedding_norm(self) -> bool {
        self == Architecture::Bloom
    }

    /// Gemma 2 or 3: scaled embeddings, a GELU MLP, norms around each sub-layer, RMSNorm
    /// gains stored minus one in Hugging Face files, and turns closed by `<end_of_turn>`.
    pub fn is_gemma(self) -> bool {
        matches!(self, Architecture::Gemma2 | Architecture::Gemma3)
    }
}
