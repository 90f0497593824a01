//! `MUSER_SIMD=scalar` forces the scalar kernels (its own process: the level is read once).

#[test]
fn muser_simd_scalar_is_honoured() {
    // Single test in this binary, so nothing has read the level yet.
    std::env::set_var("MUSER_SIMD", "scalar");
    assert_eq!(muser_quant::init_simd(), Ok(muser_quant::SimdLevel::Scalar));
    assert_eq!(muser_quant::simd_level(), muser_quant::SimdLevel::Scalar);
}
