//! Temporary folders that are removed when dropped — also when the test that
//! made them fails, since a panic unwinds through their owner.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh folder under the system's temporary folder, removed on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// `{tmp}/{prefix}-{pid}-{n}`, created empty.
    pub fn new(prefix: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("{prefix}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("a temporary folder");
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the folder.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_goes_even_when_its_owner_panics() {
        let kept = std::sync::Arc::new(std::sync::Mutex::new(PathBuf::new()));
        let seen = kept.clone();
        let failed = std::thread::spawn(move || {
            let dir = TempDir::new("svc-temp-test");
            std::fs::write(dir.join("file"), "x").unwrap();
            *seen.lock().unwrap() = dir.path().to_owned();
            panic!("the test fails");
        })
        .join();
        assert!(failed.is_err());
        let path = kept.lock().unwrap().clone();
        assert!(!path.as_os_str().is_empty() && !path.exists(), "{} is left behind", path.display());
    }
}
