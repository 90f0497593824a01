//! muser-forge (skeleton)
