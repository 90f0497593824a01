// matvec_packed_a8.cu — packed decode rows on A8 activations (`MUSER_CUDA_ACTS=a8` with several
// sequences): the tokens of several sequences (one decode row each) through one pass over Q4_K
// or Q6_K-P weights, NT = 2, 4, 8 tokens per launch, staged (mvs_*) or not (mvp_*). mva_pipe with
// the A8 formats, as matvec_packed.cu with the A16 ones: every (row, token) output equals the
// one-token A8 kernels' (matvec_a8.cu) bit for bit. Needs common.cuh + formats_a16.cuh +
// formats_a8.cuh + matvec_pipe.cuh before it. STAGE needs NT*(K/64)*80 bytes of dynamic shared
// memory (`Registry::packed_plan_a8`).

MVA_PIPE_KERNEL(mvs_q4_k_a8_t2, AQ4K8, true, 2)
MVA_PIPE_KERNEL(mvp_q4_k_a8_t2, AQ4K8, false, 2)
MVA_PIPE_KERNEL(mvs_q4_k_a8_t4, AQ4K8, true, 4)
MVA_PIPE_KERNEL(mvp_q4_k_a8_t4, AQ4K8, false, 4)
MVA_PIPE_KERNEL(mvs_q4_k_a8_t8, AQ4K8, true, 8)
MVA_PIPE_KERNEL(mvp_q4_k_a8_t8, AQ4K8, false, 8)
MVA_PIPE_KERNEL(mvs_q6p_a8_t2, AQ6KP8, true, 2)
MVA_PIPE_KERNEL(mvp_q6p_a8_t2, AQ6KP8, false, 2)
MVA_PIPE_KERNEL(mvs_q6p_a8_t4, AQ6KP8, true, 4)
MVA_PIPE_KERNEL(mvp_q6p_a8_t4, AQ6KP8, false, 4)
MVA_PIPE_KERNEL(mvs_q6p_a8_t8, AQ6KP8, true, 8)
MVA_PIPE_KERNEL(mvp_q6p_a8_t8, AQ6KP8, false, 8)
