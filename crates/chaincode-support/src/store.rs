//! The peer's installed chaincode packages on disk (Fabric's `core/chaincode/persistence.Store`): one file per
//! package, `<dir>/<label>.<hex SHA-256>.tar.gz`, written to a temporary file, synced and renamed so that a crash
//! leaves either the whole package or none. `dir` is `<peer.fileSystemPath>/lifecycle/chaincodes`, as Fabric's.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::package::{package_id, ChaincodePackage, PackageError};

/// An installed package: Fabric's `chaincode.InstalledChaincode`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Installed {
    /// `label:hex(sha256)`.
    pub package_id: String,
    /// The package's label.
    pub label: String,
}

/// Why the store refused; texts are Fabric's where a client sees them.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The package does not parse.
    #[error("could not parse as a chaincode install package: {0}")]
    Parse(#[from] PackageError),
    /// The same package is installed already.
    #[error("chaincode already successfully installed (package ID '{0}')")]
    AlreadyInstalled(String),
    /// No package with that ID.
    #[error("chaincode install package '{0}' not found")]
    NotFound(String),
    /// A file operation failed.
    #[error("{0}")]
    Io(String),
}

/// The package directory.
#[derive(Debug, Clone)]
pub struct PackageStore {
    dir: PathBuf,
}

impl PackageStore {
    /// The store in `dir`, created if missing; leftovers of an interrupted save are removed.
    ///
    /// Errors: the directory cannot be created or read.
    pub fn open(dir: &Path) -> Result<PackageStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io(format!("creating {}: {e}", dir.display())))?;
        let entries = std::fs::read_dir(dir).map_err(|e| StoreError::Io(format!("reading {}: {e}", dir.display())))?;
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().ends_with(".tmp") {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Ok(PackageStore { dir: dir.to_owned() })
    }

    fn path_of(&self, label: &str, hash_hex: &str) -> PathBuf {
        self.dir.join(format!("{label}.{hash_hex}.tar.gz"))
    }

    /// Saves `package` (which must parse), answering its ID.
    ///
    /// Errors: [`StoreError::Parse`], [`StoreError::AlreadyInstalled`], [`StoreError::Io`].
    pub fn save(&self, package: &[u8]) -> Result<Installed, StoreError> {
        let parsed = ChaincodePackage::parse(package)?;
        let id = package_id(&parsed.label, package);
        let path = self.path_of(&parsed.label, &hex::encode(Sha256::digest(package)));
        if path.exists() {
            return Err(StoreError::AlreadyInstalled(id));
        }
        let tmp = path.with_extension("tmp");
        let io = |e: std::io::Error| StoreError::Io(format!("writing {}: {e}", path.display()));
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(package).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &path).map_err(io)?;
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(Installed { package_id: id, label: parsed.label })
    }

    /// The bytes of the package `package_id`.
    ///
    /// Errors: [`StoreError::NotFound`] for an unknown or malformed ID, [`StoreError::Io`].
    pub fn load(&self, package_id: &str) -> Result<Bytes, StoreError> {
        let not_found = || StoreError::NotFound(package_id.to_owned());
        let (label, hash) = package_id.rsplit_once(':').ok_or_else(not_found)?;
        if label.contains('/') || hash.contains('/') || label.is_empty() {
            return Err(not_found());
        }
        match std::fs::read(self.path_of(label, hash)) {
            Ok(b) => Ok(Bytes::from(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(not_found()),
            Err(e) => Err(StoreError::Io(format!("reading package {package_id}: {e}"))),
        }
    }

    /// Every installed package, by package ID.
    pub fn list(&self) -> Vec<Installed> {
        let mut out = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(stem) = name.strip_suffix(".tar.gz") else { continue };
                let Some((label, hash)) = stem.rsplit_once('.') else { continue };
                if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                    out.push(Installed { package_id: format!("{label}:{hash}"), label: label.to_owned() });
                }
            }
        }
        out.sort();
        out
    }
}
