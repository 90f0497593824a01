//! muser-quant (skeleton)
