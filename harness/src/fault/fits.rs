//! Whether a schedule's faults fit the system it runs on, beyond its own
//! cluster: a database fault (database.rs) needs a system with a database.
//! The schedule alone cannot tell (the system is chosen on the command
//! line), so this check runs once both are known, before anything starts,
//! and names the file and the step as a parse error does.

use std::path::Path;

use super::{Needs, Verb};
use crate::schedule::{Invalid, Schedule, ScheduleError, step_line};
use crate::system::{ServiceKind, System};

/// Refuses the first step of `schedule` that fires a fault `system` cannot
/// take: a database fault on a system that has no database. `file` names
/// the schedule in the error; its text, when it can be read, gives the
/// step's line.
pub fn check_system(
    schedule: &Schedule,
    file: &Path,
    system: &System,
) -> Result<(), ScheduleError> {
    if system.services().any(|s| s == ServiceKind::Postgres) {
        return Ok(());
    }
    let needing = schedule.steps.iter().enumerate().find_map(|(i, step)| {
        step.faults()
            .iter()
            .map(Verb::of)
            .find(|verb| verb.spec().needs == Needs::Database)
            .map(|verb| (i, verb))
    });
    let Some((i, verb)) = needing else {
        return Ok(());
    };
    let line = std::fs::read_to_string(file)
        .ok()
        .and_then(|src| step_line(&src, i));
    Err(ScheduleError::Invalid {
        file: file.to_owned(),
        line,
        what: Invalid::NoDatabase {
            step: i + 1,
            verb: verb.name(),
            system: system.name.clone(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEDULE: &str = "[cluster]\nbrokers = 3\n\n[[cluster.topic]]\nname = \"t\"\n\
        partitions = 1\nreplication_factor = 1\n\n[[step]]\nfault = { pause = \"b1\" }\n\n\
        [[step]]\nfault = \"pause-database\"\n\n[[step]]\nfault = \"resume-database\"\n";

    #[test]
    fn a_database_fault_on_a_system_without_one_names_the_file_the_step_and_the_system() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("db.toml");
        std::fs::write(&file, SCHEDULE).unwrap();
        let schedule = Schedule::load(&file).unwrap();
        let tansu = System::named("tansu").unwrap();
        let e = check_system(&schedule, &file, &tansu).unwrap_err();
        assert_eq!(e.line(), Some(12), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "{}:12: step 2: pause-database needs a system with a database, and tansu \
                 has none",
                file.display()
            )
        );
        let nisshi = System::named("nisshi").unwrap();
        check_system(&schedule, &file, &nisshi).unwrap();
        // Without them the schedule runs anywhere.
        let mut plain = schedule.clone();
        plain.steps.truncate(1);
        check_system(&plain, &file, &tansu).unwrap();
    }
}
