//! The route identity of a CUDA session (`CudaSession::route_identity`): every parameter that
//! chooses kernels or numbers — activation format, weight layouts, attention, matmul kernels,
//! fusion, graphs, batching — and the kernel registry's SHA-256, so a receipt says what ran.

use muser_cuda::{GraphMode, MmtShape, MAX_BATCH};

use super::options::Acts;
use super::CudaSession;

impl CudaSession<'_> {
    /// The pipelined one-token decode kernels' launch in the route identity: staging, rows and
    /// blocks per SM, warps.
    fn pipe_label(&self) -> String {
        format!(
            "pipe{}-rows{}-minb{}{}",
            match (self.opts.xsmem, self.reg.stage_async) {
                (true, false) => "-xsmem",
                (true, true) => "-xsmem-async",
                (false, _) => "",
            },
            self.reg.mva_rows,
            self.reg.mva_minb,
            match self.reg.mva_warps {
                4 => String::new(),
                w => format!("-warps{w}"),
            }
        )
    }

    /// What produced the numbers: route parameters and the kernel registry's SHA-256.
    pub fn route_identity(&self) -> String {
        format!(
            "cuda:acts={}{},w={},kv=f16,attn={},mv={},mm={}{},fuse={}{},act_math={},graph={}{},mode={}{},kernels={}{}{}",
            self.opts.acts.name(),
            if self.opts.acts == Acts::A8 && self.opts.qkv() == Acts::A16 {
                "-qkv16"
            } else {
                ""
            },
            match (self.opts.acts, self.opts.q6_pad) {
                (Acts::F16, _) => "h16",
                (_, true) => "q6p",
                (_, false) => "gguf",
            },
            self.attn_label(),
            match self.opts.acts {
                Acts::A16 if self.opts.pipe => format!(
                    "{}{}{}{}",
                    self.pipe_label(),
                    if self.reg.q6_lazy { "" } else { "-q6eager" },
                    match (self.reg.mva_wstages, self.reg.mva_wstages_q6) {
                        (0, 0) => String::new(),
                        (a, b) => format!("-ring{a}.{b}"),
                    },
                    match (self.reg.mva_ahead, self.reg.mva_ahead_q6p) {
                        (1, 1) => String::new(),
                        (a, b) => format!("-ahead{a}.{b}"),
                    }
                ),
                Acts::A16 => format!("rows{}-minb{}", self.reg.mva_rows, self.reg.mva_minb),
                Acts::A8 => format!(
                    "{}{}",
                    self.pipe_label(),
                    match (self.opts.mvr, self.reg.mvr_ahead) {
                        (false, _) => String::new(),
                        (true, 0) => format!("-mvr{}", self.reg.mvr_rows),
                        (true, _) => format!("-mvr{}a", self.reg.mvr_rows),
                    }
                ),
                Acts::F16 => self.reg.h16.label(),
                Acts::F32 | Acts::Invalid => "plain".to_string(),
            },
            match (self.opts.acts, self.opts.mmq) {
                (Acts::A16 | Acts::A8, true) => format!(
                    "mmq-n{}{}{}{}",
                    self.reg.mmq_tokens,
                    match self.reg.mmq_minb {
                        1 => String::new(),
                        b => format!("-minb{b}"),
                    },
                    if self.reg.mmq_cvt == 0 { "-magic" } else { "" },
                    if self.reg.mmq_db == 1 { "-db" } else { "" }
                ),
                (Acts::F16, _) => match self.reg.mmt {
                    MmtShape::W8 => "mmt+mmh".to_string(),
                    MmtShape::Wg => format!(
                        "mmt-wg{}{}{}+mmh",
                        if self.reg.mmw_min == 0 { "0" } else { "" },
                        if self.reg.mmw_wg == 3 { "" } else { "-x2" },
                        if self.reg.mmw_split { "-split" } else { "" }
                    ),
                    m => format!("mmt-{}+mmh", m.label()),
                },
                _ => "t8".to_string(),
            },
            match (self.opts.n_seq, self.batch_packed()) {
                (1, _) => String::new(),
                (n, true) => format!(
                    ",seqs={n}/packed-w{}-nt{}{}",
                    self.reg.mvb_warps,
                    self.opts.batch_nt,
                    if self.opts.mmv_min <= self.n_past.len().min(MAX_BATCH) {
                        format!(
                            "-mmv{}{}",
                            self.opts.mmv_min,
                            if self.opts.mmv_pair { "p" } else { "" }
                        )
                    } else {
                        String::new()
                    }
                ),
                (n, false) => format!(",seqs={n}/mm"),
            },
            // `-r0`: MUSER_CUDA_NORM_RED1=0 (every norm kernel, fused or not).
            match (self.opts.fuse, self.opts.acts) {
                (false, _) => format!("off{}", self.reg.steps.norm_suffix()),
                // No combine twin; `-shfl` / `-smem` / `-unit` / `-cl8` / `-cl16`: MUSER_CUDA_NORM_H16.
                (true, Acts::F16) => format!(
                    "norm{}{}{}",
                    self.reg.steps.norm_h16.label(),
                    self.reg.steps.norm_suffix(),
                    if self.opts.h16_ew_fused { "+ew" } else { "" }
                ),
                (true, _) => format!("on{}", self.reg.steps.norm_suffix()),
            },
            match (
                self.opts.h16_rowmax_on(),
                self.opts.h16_glu_on(),
                self.opts.h16_combine_act_on(),
            ) {
                (false, _, _) => "",
                (true, false, false) => "+max",
                (true, false, true) => "+max+cact",
                // Accepted only where it runs (`h16::check_options`): decode steps.
                (true, true, false) => "+max+glu",
                (true, true, true) => "+max+glu+cact",
            },
            self.opts.act_math.label(),
            if self.opts.graphs { "on" } else { "off" },
            if self.opts.pdl_on() {
                format!("-pdl{}", self.reg.steps.pdl_suffix())
            } else {
                String::new()
            },
            match (self.opts.mode, self.opts.gate_late) {
                // `-gl`: the attention gate's branch joined late (MUSER_CUDA_GATE_LATE=1).
                (GraphMode::Parallel, true) => "parallel-gl",
                (GraphMode::Parallel, false) => "parallel",
                (GraphMode::Serial, _) => "serial",
            },
            self.l2_prefetch_label(),
            &self.reg.identity()[..16],
            match self.reg.load {
                muser_cuda::registry::Load::Ptx => "",
                muser_cuda::registry::Load::Cubin => "-cubin",
            },
            muser_cuda::probe::label(self.reg.probe_dup)
        )
    }

    /// The L2 prefetch branch in the route identity: `+l2pf{MiB}{h|t}{blocks}` (MiB one
    /// number, or the four points' joined by `-`); empty when off.
    fn l2_prefetch_label(&self) -> String {
        let o = &self.opts;
        if !o.l2_prefetch_on() {
            return String::new();
        }
        let mb = o.l2_prefetch_mb;
        let mb = if mb.iter().all(|&m| m == mb[0]) {
            mb[0].to_string()
        } else {
            mb.map(|m| m.to_string()).join("-")
        };
        format!(
            "+l2pf{mb}{}{}",
            o.l2_prefetch_kind_on().letter(),
            o.l2_prefetch_blocks_on()
        )
    }

    /// The attention in the route identity: `f32/s{keys per partial}h{heads per block}[-mt]`,
    /// or the f16 route's tensor-core kernels `h16mma/s{keys}t{prefill tokens per block}` (`-bN`:
    /// N decode tiles in flight, `MUSER_CUDA_ATTN_BUFS`; `-c4`: four warps per decode block's 16
    /// rows, `MUSER_CUDA_ATTN_COLS=4`); then what differs from the step switches' defaults
    /// (`StepSwitches::attn_suffix`: `-e0` without the early tile requests, `-cw0` without the
    /// wide decode combine, `-cwN` / `-cwNp` with another width or unpiped).
    fn attn_label(&self) -> String {
        let label = match self.attn_h16 {
            Some((dec, pre)) => format!(
                "h16mma/s{}t{}{}{}",
                self.opts.attn_super,
                pre.tokens,
                match self.opts.attn_bufs {
                    Some(_) => format!("-b{}", dec.bufs),
                    None => String::new(),
                },
                if dec.cols > 1 {
                    format!("-c{}", dec.cols)
                } else {
                    String::new()
                }
            ),
            None => format!(
                "f32/s{}h{}{}",
                self.opts.attn_super,
                self.attn_hpb(),
                if self.attn_prefill.is_some() {
                    "-mt"
                } else {
                    ""
                }
            ),
        };
        label + &self.reg.steps.attn_suffix()
    }
}
