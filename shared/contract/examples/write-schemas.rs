//! Regenerates the checked-in `schemas/` folder after a deliberate contract
//! change: `cargo run -p svc-contract --example write-schemas`.

use std::path::Path;

fn main() -> std::io::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas");
    let _ = std::fs::remove_dir_all(dir.join("operations"));
    std::fs::create_dir_all(dir.join("operations"))?;
    let files = svc_contract::files::schema_files();
    for (name, text) in &files {
        std::fs::write(dir.join(name), text)?;
    }
    println!("wrote {} files to {}", files.len(), dir.display());
    Ok(())
}
