//! `fare generate man|completions DIR` (hidden): the manual pages and the bash, zsh and
//! fish completions, generated from the clap definitions so they never drift from the
//! command line. scripts/package ships them.

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to write.
    #[arg(value_enum)]
    pub what: What,
    /// Directory to write into (created when missing).
    pub dir: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum What {
    /// fare.1 and one page per subcommand (fare-agent.1, fare-topo-check.1...).
    Man,
    /// fare.bash, _fare (zsh) and fare.fish.
    Completions,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cmd = super::Cli::command();
    match args.what {
        What::Man => clap_mangen::generate_to(cmd, dir),
        What::Completions => [Shell::Bash, Shell::Zsh, Shell::Fish]
            .into_iter()
            .try_for_each(|shell| {
                clap_complete::generate_to(shell, &mut cmd, "fare", dir).map(drop)
            }),
    }
    .with_context(|| format!("writing into {}", dir.display()))
}
