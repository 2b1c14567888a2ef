//! The `epochal-broker` binary. The network server arrives with [broker-wire];
//! until then it exposes the storage engine for demos and manual inspection.

fn main() -> anyhow::Result<()> {
    anyhow::bail!("epochal-broker: the server is not built yet (issue [broker-wire])")
}
