//! `fare lab` (to be implemented).

#[derive(clap::Subcommand, Debug)]
pub enum Command {}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {}
}
