//! `fare show` (to be implemented).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`fare show` is not implemented yet")
}
