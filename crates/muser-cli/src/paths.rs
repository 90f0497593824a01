//! Where Muser keeps things: the cache directory and the default model.

use std::path::PathBuf;

/// File name of the default model (gemma-3-270m Q4_K_M, fetched by `scripts/fetch-default-model.sh`).
pub const DEFAULT_MODEL_FILE: &str = "gemma-3-270m-q4_k_m.gguf";

/// `$MUSER_CACHE`, else `$HOME/.cache/muser`.
pub fn cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("MUSER_CACHE") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache").join("muser")
}

/// The model to use when `-m` is not given: `$MUSER_MODEL`, else the fetched default model.
pub fn default_model() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("MUSER_MODEL") {
        return Ok(PathBuf::from(p));
    }
    let p = cache_dir().join("models").join(DEFAULT_MODEL_FILE);
    if p.is_file() {
        Ok(p)
    } else {
        anyhow::bail!(
            "no model given and the default model is not at {}; run scripts/fetch-default-model.sh \
             (or pass a GGUF path)",
            p.display()
        )
    }
}
