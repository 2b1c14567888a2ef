//! The PostgreSQL service's unit tests: the startup message, error
//! responses, the readiness probe and the version and permission rules.

use super::*;

#[test]
fn startup_message_is_protocol_3_with_user_and_database() {
    let mut want = vec![0, 0, 0, 41, 0, 3, 0, 0];
    want.extend_from_slice(b"user\0postgres\0database\0postgres\0\0");
    assert_eq!(want.len(), 41);
    assert_eq!(startup_message("postgres", "postgres"), want);
}

#[test]
fn an_error_response_reads_as_its_sqlstate_and_message() {
    let body = b"SFATAL\0VFATAL\0C57P03\0Mthe database system is starting up\0Fpostmaster.c\0\0";
    assert_eq!(
        error_response_text(body),
        "57P03: the database system is starting up"
    );
}

#[tokio::test]
async fn startup_is_ready_only_after_authentication_ok_and_ready_for_query() {
    let mut answer = Vec::new();
    answer.extend_from_slice(&[b'R', 0, 0, 0, 8, 0, 0, 0, 0]);
    answer.extend_from_slice(b"S\0\0\0\x18server_version\x0015.0\0");
    answer.extend_from_slice(&[b'K', 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 2]);
    answer.extend_from_slice(&[b'Z', 0, 0, 0, 5, b'I']);
    assert_eq!(read_until_ready(&mut answer.as_slice()).await, Ok(()));

    let password = [b'R', 0, 0, 0, 8, 0, 0, 0, 3];
    assert!(matches!(
        read_until_ready(&mut password.as_slice()).await,
        Err(Attempt::Wrong(_))
    ));

    let starting = b"E\0\0\0\x0fC57P03\0Mx\0\0";
    assert_eq!(
        read_until_ready(&mut starting.as_slice()).await,
        Err(Attempt::NotYet("57P03: x".into()))
    );

    let cut_short = [b'R', 0, 0, 0, 8, 0, 0, 0, 0];
    assert!(matches!(
        read_until_ready(&mut cut_short.as_slice()).await,
        Err(Attempt::NotYet(_))
    ));
}

#[tokio::test]
async fn the_probe_gives_up_at_its_deadline_when_nothing_listens() {
    let port = free_port().unwrap();
    let timeout = Duration::from_millis(200);
    let started = Instant::now();
    let error = postgres_ready(&format!("127.0.0.1:{port}"), timeout)
        .await
        .unwrap_err();
    assert!(matches!(error, RuntimeError::Timeout { .. }), "{error}");
    assert!(started.elapsed() < timeout + Duration::from_secs(2));
}

#[tokio::test]
async fn the_probe_fails_at_once_on_a_server_that_is_not_postgres() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
    });
    let error = postgres_ready(&address, Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(error, RuntimeError::Postgres { .. }), "{error}");
    server.await.unwrap();
}

#[test]
fn the_highest_major_version_wins_as_a_version_not_as_text() {
    let root = tempfile::tempdir().unwrap();
    for major in ["9.6", "10", "15", "not-a-version"] {
        std::fs::create_dir(root.path().join(major)).unwrap();
    }
    assert_eq!(
        highest_major_bindir(root.path()),
        Some(root.path().join("15/bin"))
    );
    assert_eq!(highest_major_bindir(&root.path().join("absent")), None);
}

#[test]
fn a_stat_line_gives_state_and_parent_even_when_the_name_has_parentheses() {
    let stat = "4174 (postgres: (checkpointer)) S 4172 4174 4174 0 -1 4194624";
    assert_eq!(state_and_ppid(stat), Some(('S', 4172)));
    assert_eq!(state_and_ppid("4174 (postgres"), None);
}

#[test]
fn search_permission_follows_owner_then_group_then_others() {
    let root = (0, 0);
    assert!(!searchable(0o700, root, 101, 104));
    assert!(searchable(0o701, root, 101, 104));
    assert!(searchable(0o710, (0, 104), 101, 104));
    assert!(!searchable(0o701, (0, 104), 101, 104));
    assert!(searchable(0o700, (101, 0), 101, 104));
}
