//! Records the git commit the binary is built from (`MUSER_GIT_COMMIT`, with `-dirty` when
//! tracked files differ from it; `unknown` outside a git checkout), so `muser --version` and
//! every receipt name the code that produced them — a copied working tree's own git metadata
//! can be stale, the binary's cannot.

use std::process::Command;

fn git(args: &[&str]) -> Option<std::process::Output> {
    Command::new("git").args(args).output().ok()
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"])
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    let value = match commit {
        Some(c) => {
            let dirty =
                git(&["diff", "--quiet", "HEAD", "--"]).is_some_and(|o| !o.status.success());
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=MUSER_GIT_COMMIT={value}");
    // Re-run when the checkout moves (commit, checkout), the index changes (add, commit) or any
    // source under crates/ changes (cargo scans a directory recursively), so `-dirty` is fresh.
    for p in ["../../.git/HEAD", "../../.git/index", "../../crates"] {
        if std::path::Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
