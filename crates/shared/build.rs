//! Embeds `migrations/*.sql` in version order, so the binary migrates without the files.

use std::{env, fs, path::PathBuf};

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../migrations");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("migrations/ exists at the workspace root")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    let mut out = String::from("pub const MIGRATIONS: &[(&str, &str)] = &[\n");
    for f in &files {
        let version = f.file_stem().unwrap().to_string_lossy();
        let path = f.canonicalize().unwrap();
        println!("cargo:rerun-if-changed={}", path.display());
        out += &format!("    ({version:?}, include_str!({:?})),\n", path.display().to_string());
    }
    out += "];\n";
    fs::write(PathBuf::from(env::var("OUT_DIR").unwrap()).join("migrations.rs"), out).unwrap();
}
