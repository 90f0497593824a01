//! muser-engine (skeleton)
