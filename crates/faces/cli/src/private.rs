//! The data directory is private to the user running Toolshed: the database (with its `-wal`
//! and `-shm` files), `tool-vectors.bin` and the key file hold tool results, audit entries and
//! sealed credentials. The process creates files with umask `077` ([`restrict_umask`], first
//! thing in `main`), and at start-up [`secure_data_dir`] makes the directory `0700` and every
//! entry in it `0600` (directories `0700`), which repairs installs made by older versions.

use std::path::Path;

use anyhow::Context;

/// New files and directories of this process are readable by their owner only.
pub fn restrict_umask() {
    #[cfg(unix)]
    // SAFETY: umask only swaps the process's file mode creation mask; it cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Creates `dir` if needed and makes it and its entries private (symbolic links are left alone).
pub fn secure_data_dir(dir: &Path) -> anyhow::Result<()> {
    let shown = dir.display();
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("creating the data directory {shown}"))?;
    #[cfg(unix)]
    {
        restrict(dir, 0o700).with_context(|| format!("making {shown} private (0700)"))?;
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("reading the data directory {shown}"))?;
        for entry in entries {
            let path = entry
                .with_context(|| format!("reading the data directory {shown}"))?
                .path();
            let meta = std::fs::symlink_metadata(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let mode = if meta.is_dir() {
                0o700
            } else if meta.is_file() {
                0o600
            } else {
                continue;
            };
            restrict(&path, mode)
                .with_context(|| format!("making {} private ({mode:o})", path.display()))?;
        }
    }
    Ok(())
}

/// Sets `mode` when the permission bits differ.
#[cfg(unix)]
fn restrict(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let current = std::fs::symlink_metadata(path)?.permissions().mode() & 0o7777;
    if current != mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn an_open_directory_and_its_files_become_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        for f in ["toolshed.db", "toolshed.db-wal", "secret.key"] {
            let p = dir.join(f);
            std::fs::write(&p, "x").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        std::fs::create_dir(dir.join("sub")).unwrap();
        let outside = root.path().join("outside");
        std::fs::write(&outside, "x").unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();

        secure_data_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        for f in ["toolshed.db", "toolshed.db-wal", "secret.key"] {
            assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
        }
        assert_eq!(mode(&dir.join("sub")), 0o700);
        assert_eq!(mode(&outside), 0o644, "a link's target is not touched");
    }

    #[test]
    fn a_missing_directory_is_created_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        secure_data_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }
}
