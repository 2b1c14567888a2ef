//! The schedule parser (`epochal run FILE`): any text gives a checked
//! schedule or an error naming a line, never a panic; a schedule that parses
//! prints back to TOML that parses to the same schedule.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(schedule) = epochal::schedule::Schedule::parse("fuzz.toml", text) {
        let again = epochal::schedule::Schedule::parse("fuzz.toml", &schedule.to_toml())
            .expect("a printed schedule parses");
        assert_eq!(
            again, schedule,
            "printing and parsing again changed the schedule"
        );
    }
});
