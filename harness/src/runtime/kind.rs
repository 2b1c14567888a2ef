//! Which runtime realises a run's cluster: the `--runtime` value of `run`,
//! `replay`, `gate`, `campaign` and `shrink`, carried in the run's options
//! (run/, gate/) down to where the cluster starts.

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeKind {
    /// Nodes as local child processes on 127.0.0.1.
    Process,
    /// Each node a Docker container of its own on a network made for the run;
    /// images built locally, nothing pulled (runtime/docker).
    Docker,
}
