//! The typed kernel identities: every kernel Muser launches is one `Kernel` variant, defined once
//! here with its module (`.cu` family, `compile::Module`) and its entry symbol. The NVRTC test
//! (`compile`) checks that every variant's symbol is an entry of its module's PTX; the registry
//! (`registry`) loads them by these names and fails closed on any it did not build.

use crate::compile::Module;

macro_rules! kernels {
    ($($v:ident => $m:ident, $sym:literal;)*) => {
        /// Every kernel Muser launches.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kernel { $($v,)* }
        impl Kernel {
            pub const ALL: &'static [Kernel] = &[$(Kernel::$v,)*];
            pub fn module(self) -> Module { match self { $(Kernel::$v => Module::$m,)* } }
            pub fn symbol(self) -> &'static str { match self { $(Kernel::$v => $sym,)* } }
        }
    };
}

kernels! {
    MvQ4kT1 => Matvec, "mv_q4_k_t1"; MvQ4kT8 => Matvec, "mv_q4_k_t8";
    MvQ5kT1 => Matvec, "mv_q5_k_t1"; MvQ5kT8 => Matvec, "mv_q5_k_t8";
    MvQ6kT1 => Matvec, "mv_q6_k_t1"; MvQ6kT8 => Matvec, "mv_q6_k_t8";
    MvQ80T1 => Matvec, "mv_q8_0_t1"; MvQ80T8 => Matvec, "mv_q8_0_t8";
    MvQ50T1 => Matvec, "mv_q5_0_t1"; MvQ50T8 => Matvec, "mv_q5_0_t8";
    MvF16T1 => Matvec, "mv_f16_t1"; MvF16T8 => Matvec, "mv_f16_t8";
    MvF32T1 => Matvec, "mv_f32_t1"; MvF32T8 => Matvec, "mv_f32_t8";
    EmbedQ4k => Matvec, "embed_q4_k"; EmbedQ5k => Matvec, "embed_q5_k";
    EmbedQ6k => Matvec, "embed_q6_k"; EmbedQ80 => Matvec, "embed_q8_0";
    EmbedQ50 => Matvec, "embed_q5_0"; EmbedF16 => Matvec, "embed_f16";
    EmbedF32 => Matvec, "embed_f32";
    QuantA16 => MatvecA16, "quant_a16";
    MvpQ4kT1 => MatvecA16, "mvp_q4_k_t1"; MvpQ6kT1 => MatvecA16, "mvp_q6_k_t1";
    MvsQ4kT1 => MatvecA16, "mvs_q4_k_t1"; MvsQ6kT1 => MatvecA16, "mvs_q6_k_t1";
    MvpQ6pT1 => MatvecA16, "mvp_q6p_t1"; MvsQ6pT1 => MatvecA16, "mvs_q6p_t1";
    MvpQ4kT2 => MatvecPacked, "mvp_q4_k_t2"; MvpQ6kT2 => MatvecPacked, "mvp_q6_k_t2";
    MvsQ4kT2 => MatvecPacked, "mvs_q4_k_t2"; MvsQ6kT2 => MatvecPacked, "mvs_q6_k_t2";
    MvpQ4kT4 => MatvecPacked, "mvp_q4_k_t4"; MvpQ6kT4 => MatvecPacked, "mvp_q6_k_t4";
    MvsQ4kT4 => MatvecPacked, "mvs_q4_k_t4"; MvsQ6kT4 => MatvecPacked, "mvs_q6_k_t4";
    MvpQ4kT8 => MatvecPacked, "mvp_q4_k_t8"; MvpQ6kT8 => MatvecPacked, "mvp_q6_k_t8";
    MvsQ4kT8 => MatvecPacked, "mvs_q4_k_t8"; MvsQ6kT8 => MatvecPacked, "mvs_q6_k_t8";
    MvpQ6pT2 => MatvecPacked, "mvp_q6p_t2"; MvsQ6pT2 => MatvecPacked, "mvs_q6p_t2";
    MvpQ6pT4 => MatvecPacked, "mvp_q6p_t4"; MvsQ6pT4 => MatvecPacked, "mvs_q6p_t4";
    MvpQ6pT8 => MatvecPacked, "mvp_q6p_t8"; MvsQ6pT8 => MatvecPacked, "mvs_q6p_t8";
    MmqQ4k => MmqA16, "mmq_q4_k"; MmqQ6k => MmqA16, "mmq_q6_k"; MmqQ6p => MmqA16, "mmq_q6p";
    MmvQ4k => MmvA16, "mmv_q4_k"; MmvQ6k => MmvA16, "mmv_q6_k"; MmvQ6p => MmvA16, "mmv_q6p";
    MmvPairQ4k => MmvA16, "mmv_pair_q4_k"; MmvPairQ6k => MmvA16, "mmv_pair_q6_k";
    MmvPairQ6p => MmvA16, "mmv_pair_q6p";
    MvaQ4kT1 => MatvecA16, "mva_q4_k_t1"; MvaQ4kT8 => MatvecA16, "mva_q4_k_t8";
    MvaQ5kT1 => MatvecA16, "mva_q5_k_t1"; MvaQ5kT8 => MatvecA16, "mva_q5_k_t8";
    MvaQ6kT1 => MatvecA16, "mva_q6_k_t1"; MvaQ6kT8 => MatvecA16, "mva_q6_k_t8";
    MvaQ6pT1 => MatvecA16, "mva_q6p_t1"; MvaQ6pT8 => MatvecA16, "mva_q6p_t8";
    MvaQ80T1 => MatvecA16, "mva_q8_0_t1"; MvaQ80T8 => MatvecA16, "mva_q8_0_t8";
    MvaQ50T1 => MatvecA16, "mva_q5_0_t1"; MvaQ50T8 => MatvecA16, "mva_q5_0_t8";
    MvaF16T1 => MatvecA16, "mva_f16_t1"; MvaF16T8 => MatvecA16, "mva_f16_t8";
    MvaF32T1 => MatvecA16, "mva_f32_t1"; MvaF32T8 => MatvecA16, "mva_f32_t8";
    QuantA8 => MatvecA8, "quant_a8";
    MvsQ4kA8T1 => MatvecA8, "mvs_q4_k_a8_t1"; MvpQ4kA8T1 => MatvecA8, "mvp_q4_k_a8_t1";
    MvsQ6pA8T1 => MatvecA8, "mvs_q6p_a8_t1"; MvpQ6pA8T1 => MatvecA8, "mvp_q6p_a8_t1";
    MvaQ4kA8T8 => MatvecA8, "mva_q4_k_a8_t8"; MvaQ6pA8T8 => MatvecA8, "mva_q6p_a8_t8";
    MmqQ4kA8 => MmqA8, "mmq_q4_k_a8"; MmqQ6pA8 => MmqA8, "mmq_q6p_a8";
    MvrQ4kA8T1 => MatvecA8, "mvr_q4_k_a8_t1"; MvrQ6pA8T1 => MatvecA8, "mvr_q6p_a8_t1";
    MvaQ5kA8T1 => MatvecA8, "mva_q5_k_a8_t1"; MvaQ5kA8T8 => MatvecA8, "mva_q5_k_a8_t8";
    MvaQ80A8T1 => MatvecA8, "mva_q8_0_a8_t1"; MvaQ80A8T8 => MatvecA8, "mva_q8_0_a8_t8";
    MvaQ50A8T1 => MatvecA8, "mva_q5_0_a8_t1"; MvaQ50A8T8 => MatvecA8, "mva_q5_0_a8_t8";
    MvsQ4kA8T2 => MatvecPackedA8, "mvs_q4_k_a8_t2"; MvpQ4kA8T2 => MatvecPackedA8, "mvp_q4_k_a8_t2";
    MvsQ4kA8T4 => MatvecPackedA8, "mvs_q4_k_a8_t4"; MvpQ4kA8T4 => MatvecPackedA8, "mvp_q4_k_a8_t4";
    MvsQ4kA8T8 => MatvecPackedA8, "mvs_q4_k_a8_t8"; MvpQ4kA8T8 => MatvecPackedA8, "mvp_q4_k_a8_t8";
    MvsQ6pA8T2 => MatvecPackedA8, "mvs_q6p_a8_t2"; MvpQ6pA8T2 => MatvecPackedA8, "mvp_q6p_a8_t2";
    MvsQ6pA8T4 => MatvecPackedA8, "mvs_q6p_a8_t4"; MvpQ6pA8T4 => MatvecPackedA8, "mvp_q6p_a8_t4";
    MvsQ6pA8T8 => MatvecPackedA8, "mvs_q6p_a8_t8"; MvpQ6pA8T8 => MatvecPackedA8, "mvp_q6p_a8_t8";
    MmvQ4kA8 => MmvA8, "mmv_q4_k_a8"; MmvQ6pA8 => MmvA8, "mmv_q6p_a8";
    ActH16 => MatvecH16, "act_h16"; ActH16M => MatvecH16, "act_h16_m";
    MvhGluQ4hS2 => MatvecH16, "mvh_glu_q4h_s2"; MvhGluQ4hS4 => MatvecH16, "mvh_glu_q4h_s4";
    MvhGluQ6hS2 => MatvecH16, "mvh_glu_q6h_s2"; MvhGluQ6hS4 => MatvecH16, "mvh_glu_q6h_s4";
    MvhGluQ4hS8 => MatvecH16, "mvh_glu_q4h_s8"; MvhGluQ4hS16 => MatvecH16, "mvh_glu_q4h_s16";
    MvhGluQ6hS8 => MatvecH16, "mvh_glu_q6h_s8"; MvhGluQ6hS16 => MatvecH16, "mvh_glu_q6h_s16";
    // Experiments' kernels (the `mvh_persist` example), not launched by the engine.
    MvhPersistQ4hS4 => ProbesH16, "mvh_persist_q4h_s4";
    StreamPhases => ProbesH16, "stream_phases"; StreamPhasesFree => ProbesH16, "stream_phases_free";
    StreamChainsQ4hS4 => ProbesH16, "stream_chains_q4h_s4";
    StreamChainsXQ4hS4 => ProbesH16, "stream_chains_x_q4h_s4";
    MvhNoactQ4hS4 => ProbesH16, "mvh_noact_q4h_s4";
    MvhQ4hS2 => MatvecH16, "mvh_q4h_s2"; MvhQ6hS2 => MatvecH16, "mvh_q6h_s2";
    MmhQ4hS2 => MatvecH16, "mmh_q4h_s2"; MmhQ6hS2 => MatvecH16, "mmh_q6h_s2";
    MmtQ4hS2 => MmtH16, "mmt_q4h_s2"; MmtQ6hS2 => MmtH16, "mmt_q6h_s2";
    MvhQ4hS4 => MatvecH16, "mvh_q4h_s4"; MvhQ4hS8 => MatvecH16, "mvh_q4h_s8";
    MvhQ4hS16 => MatvecH16, "mvh_q4h_s16";
    MvhQ6hS4 => MatvecH16, "mvh_q6h_s4"; MvhQ6hS8 => MatvecH16, "mvh_q6h_s8";
    MvhQ6hS16 => MatvecH16, "mvh_q6h_s16";
    MvhQ4hS8C2 => MatvecH16, "mvh_q4h_s8_c2"; MvhQ6hS8C2 => MatvecH16, "mvh_q6h_s8_c2";
    MvhQ4hS16C4 => MatvecH16, "mvh_q4h_s16_c4"; MvhQ6hS16C4 => MatvecH16, "mvh_q6h_s16_c4";
    MmhQ4hS4 => MatvecH16, "mmh_q4h_s4"; MmhQ4hS8 => MatvecH16, "mmh_q4h_s8";
    MmhQ4hS16 => MatvecH16, "mmh_q4h_s16";
    MmhQ6hS4 => MatvecH16, "mmh_q6h_s4"; MmhQ6hS8 => MatvecH16, "mmh_q6h_s8";
    MmhQ6hS16 => MatvecH16, "mmh_q6h_s16";
    MmtQ4hS4 => MmtH16, "mmt_q4h_s4"; MmtQ4hS8 => MmtH16, "mmt_q4h_s8";
    MmtQ4hS16 => MmtH16, "mmt_q4h_s16";
    MmtQ6hS4 => MmtH16, "mmt_q6h_s4"; MmtQ6hS8 => MmtH16, "mmt_q6h_s8";
    MmtQ6hS16 => MmtH16, "mmt_q6h_s16";
    H16Natural => MmwH16, "h16_natural";
    MmwQ4hS2 => MmwH16, "mmw_q4h_s2"; MmwQ4hS4 => MmwH16, "mmw_q4h_s4";
    MmwQ4hS8 => MmwH16, "mmw_q4h_s8"; MmwQ4hS16 => MmwH16, "mmw_q4h_s16";
    MmwQ6hS2 => MmwH16, "mmw_q6h_s2"; MmwQ6hS4 => MmwH16, "mmw_q6h_s4";
    MmwQ6hS8 => MmwH16, "mmw_q6h_s8"; MmwQ6hS16 => MmwH16, "mmw_q6h_s16";
    MmwsQ4hS4 => MmwH16, "mmws_q4h_s4"; MmwsQ4hS8 => MmwH16, "mmws_q4h_s8";
    MmwsQ4hS16 => MmwH16, "mmws_q4h_s16";
    MmwsQ6hS4 => MmwH16, "mmws_q6h_s4"; MmwsQ6hS8 => MmwH16, "mmws_q6h_s8";
    MmwsQ6hS16 => MmwH16, "mmws_q6h_s16";
    MmwFold => MmwH16, "mmw_fold";
    RmsnormRows => Norm, "rmsnorm_rows";
    EmbedFinish => Norm, "embed_finish";
    ResidualNorm => Norm, "residual_norm";
    ResidualNormQ => Norm, "residual_norm_q";
    ResidualNormQ8 => Norm, "residual_norm_q8";
    ResidualNormH16 => Norm, "residual_norm_h16";
    ResidualNormH16Cl8 => Norm, "residual_norm_h16_cl8";
    ResidualNormH16Cl16 => Norm, "residual_norm_h16_cl16";
    SigmoidGateQ => Elementwise, "sigmoid_gate_q";
    SigmoidGateQ8 => Elementwise, "sigmoid_gate_q8";
    SwigluQ => Elementwise, "swiglu_q";
    SwigluQ8 => Elementwise, "swiglu_q8";
    GegluQ => Elementwise, "geglu_q";
    GegluQ8 => Elementwise, "geglu_q8";
    SigmoidGateH16 => Elementwise, "sigmoid_gate_h16";
    SwigluH16 => Elementwise, "swiglu_h16";
    GegluH16 => Elementwise, "geglu_h16";
    SigmoidGateM => Elementwise, "sigmoid_gate_m";
    SwigluM => Elementwise, "swiglu_m";
    GegluM => Elementwise, "geglu_m";
    QkNormRopeKv => Rope, "qk_norm_rope_kv";
    AttnPartial => Attention, "attn_partial";
    AttnPartialMt => Attention, "attn_partial_mt";
    AttnH16D64 => AttnH16, "attn_h16_d64"; AttnH16D128 => AttnH16, "attn_h16_d128";
    AttnH16D64C4 => AttnH16, "attn_h16_d64_c4"; AttnH16D128C4 => AttnH16, "attn_h16_d128_c4";
    AttnCombine => Attention, "attn_combine";
    AttnCombineQ => Attention, "attn_combine_q";
    AttnCombineQ8 => Attention, "attn_combine_q8";
    AttnCombineM => Attention, "attn_combine_m";
    AttnCombineMWide => Attention, "attn_combine_m_wide";
    AttnCombineH16 => Attention, "attn_combine_h16";
    AttnCombineH16Cl => Attention, "attn_combine_h16_cl";
    SigmoidGate => Elementwise, "sigmoid_gate";
    L2Prefetch => Prefetch, "l2_prefetch";
    L2Touch => Prefetch, "l2_touch";
    Swiglu => Elementwise, "swiglu";
    Geglu => Elementwise, "geglu";
    ScaleSoftcap => Elementwise, "scale_softcap";
}
