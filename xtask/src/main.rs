//! Project automation, run as `cargo xtask <command>`.

fn main() -> anyhow::Result<()> {
    anyhow::bail!("xtask: no commands yet")
}
