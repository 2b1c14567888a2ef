//! `epochal-proxy`: a Toxiproxy-compatible proxy (issue [proxy]).

fn main() -> anyhow::Result<()> {
    anyhow::bail!("epochal-proxy: not built yet (issue [proxy])")
}
