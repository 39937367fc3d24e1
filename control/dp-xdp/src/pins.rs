//! Where the XDP state lives in bpffs, per node:
//! ```text
//! <root>/<node>/maps/<MAP>      every map of the program (pinned by name)
//! <root>/<node>/links/<ifname>  the XDP link of each interface
//! <root>/<node>/program-<id>    the program in those links, by identity (see `keep`)
//! <root>/<node>/stages-<id>     its program array of stages (holds their entries)
//! ```
//! A link pinned there keeps the program attached after the agent exits (also after
//! `kill -9`); a restarted agent loads the program against the same maps and swaps it
//! into the links atomically, so forwarding never stops.

use std::io;
use std::path::{Path, PathBuf};

/// Default bpffs root of fare's pins.
pub const DEFAULT_ROOT: &str = "/sys/fs/bpf/fare";
const PROGRAM_PREFIX: &str = "program-";
const STAGES_PREFIX: &str = "stages-";

#[derive(Clone, Debug)]
pub struct PinDir {
    pub node: PathBuf,
}

impl PinDir {
    pub fn new(root: &Path, node: &str) -> PinDir {
        PinDir {
            node: root.join(node),
        }
    }

    pub fn maps(&self) -> PathBuf {
        self.node.join("maps")
    }

    pub fn link(&self, ifname: &str) -> PathBuf {
        self.node.join("links").join(ifname)
    }

    /// The pinned program of identity `id` (bpffs holds no regular files, so the
    /// identity is the pin's name).
    pub fn program(&self, id: &str) -> PathBuf {
        self.node.join(format!("{PROGRAM_PREFIX}{id}"))
    }

    /// Every pinned program of the node, whatever its identity.
    pub fn programs(&self) -> Vec<PathBuf> {
        self.starting_with(PROGRAM_PREFIX)
    }

    /// The pinned program array of the stages of the program of identity `id`: a
    /// program array keeps its entries only while user space holds it (a pin or a file
    /// descriptor), so the program in the links needs it pinned after the agent exits.
    pub fn stages(&self, id: &str) -> PathBuf {
        self.node.join(format!("{STAGES_PREFIX}{id}"))
    }

    /// Every pinned program array of stages of the node, whatever its identity.
    pub fn all_stages(&self) -> Vec<PathBuf> {
        self.starting_with(STAGES_PREFIX)
    }

    fn starting_with(&self, prefix: &str) -> Vec<PathBuf> {
        let Ok(dir) = std::fs::read_dir(&self.node) else {
            return Vec::new();
        };
        dir.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
            .map(|e| e.path())
            .collect()
    }

    /// Makes sure bpffs is mounted under `root` and creates the directories.
    pub fn prepare(&self, root: &Path) -> io::Result<()> {
        super::bpffs::ensure_logged(root)?;
        std::fs::create_dir_all(self.maps())?;
        std::fs::create_dir_all(self.node.join("links"))?;
        Ok(())
    }

    /// Removes every pin of the node (the program detaches once nothing holds it).
    pub fn remove_all(&self) -> io::Result<()> {
        match std::fs::remove_dir_all(&self.node) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}
