//! `fare weights` (to be implemented).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`fare weights` is not implemented yet")
}
