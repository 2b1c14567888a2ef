//! The `epochal` command line.

fn main() -> anyhow::Result<()> {
    anyhow::bail!("epochal: no subcommands yet")
}
