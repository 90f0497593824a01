// matvec_packed.cu — packed decode: the tokens of several sequences (one decode row each)
// through one pass over the weights (Q4_K, Q6_K), NT = 2, 4, 8 tokens per launch; the
// building block of batched decode (issue 5); Q6_K also on its aligned repack (Q6_K-P, AQ6KP).
// Every (row, token) output is bit-identical to the one-token decode kernels' (mva_pipe,
// matvec_pipe.cuh). A separate module so the engine's
// start-up does not compile it: only `Registry::build_modules` with `Module::MatvecPacked`
// (the packed-decode benchmark and tests) does. STAGE (mvs_*) needs NT*(K/64)*72 shorts of
// dynamic shared memory.

MVA_PIPE_KERNEL(mvs_q4_k_t2, AQ4K, true, 2)
MVA_PIPE_KERNEL(mvs_q6_k_t2, AQ6K, true, 2)
MVA_PIPE_KERNEL(mvp_q4_k_t2, AQ4K, false, 2)
MVA_PIPE_KERNEL(mvp_q6_k_t2, AQ6K, false, 2)
MVA_PIPE_KERNEL(mvs_q4_k_t4, AQ4K, true, 4)
MVA_PIPE_KERNEL(mvs_q6_k_t4, AQ6K, true, 4)
MVA_PIPE_KERNEL(mvp_q4_k_t4, AQ4K, false, 4)
MVA_PIPE_KERNEL(mvp_q6_k_t4, AQ6K, false, 4)
MVA_PIPE_KERNEL(mvp_q4_k_t8, AQ4K, false, 8)
MVA_PIPE_KERNEL(mvp_q6_k_t8, AQ6K, false, 8)
MVA_PIPE_KERNEL(mvs_q4_k_t8, AQ4K, true, 8)
MVA_PIPE_KERNEL(mvs_q6_k_t8, AQ6K, true, 8)
MVA_PIPE_KERNEL(mvs_q6p_t2, AQ6KP, true, 2)
MVA_PIPE_KERNEL(mvp_q6p_t2, AQ6KP, false, 2)
MVA_PIPE_KERNEL(mvs_q6p_t4, AQ6KP, true, 4)
MVA_PIPE_KERNEL(mvp_q6p_t4, AQ6KP, false, 4)
MVA_PIPE_KERNEL(mvp_q6p_t8, AQ6KP, false, 8)
MVA_PIPE_KERNEL(mvs_q6p_t8, AQ6KP, true, 8)
