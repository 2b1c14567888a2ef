//! The harness's integration tests, one module per file beside this one, in
//! one test binary: one link and one copy of the shared helpers (`common`)
//! instead of one per file. nextest still runs each test in its own process,
//! so no test sees another's state. `layers/` stays a binary of its own (its
//! analyser names its own modules by `crate::` paths).

mod cluster_up_common;
mod common;

mod broker_settings_pinned;
mod campaign;
mod checker_consumer;
mod checker_data;
mod checker_fencing;
mod checker_groups;
mod checker_leaders;
mod checker_transactions;
mod ci_workflows;
mod cluster_background;
mod cluster_client;
mod cluster_coverage;
mod cluster_final_read;
mod cluster_gate;
mod cluster_hw_out_of_range;
mod cluster_kafka532;
mod cluster_kip101;
mod cluster_kip101_scenario2;
mod cluster_kip279;
mod cluster_partitions;
mod cluster_postgres;
mod cluster_read_process_write;
mod cluster_report;
mod cluster_requests;
mod cluster_run;
mod cluster_runtime;
mod cluster_shrink;
mod cluster_stop_race;
mod cluster_systems;
mod cluster_timeline;
mod cluster_txn_offsets;
mod cluster_unclean_divergence;
mod cluster_up;
mod cluster_up_app;
mod cluster_up_app_commits;
mod cluster_up_coordinators;
mod cluster_waits;
mod docker_gate;
mod docker_gc;
mod docker_run;
mod docker_runtime;
mod gate_shard;
mod guarantees_doc;
mod history;
mod idempotent_client;
mod idempotent_cluster;
mod idempotent_snapshot;
mod nemesis_disk;
mod reader_cli;
mod reader_damage;
mod reader_fixtures;
mod reader_producer_snapshot;
mod reader_transactions;
mod real_clients_admin;
mod real_clients_auto_create;
mod real_clients_group_faults;
mod real_clients_groups;
mod real_clients_idempotent;
mod real_clients_null_fields;
mod real_clients_transactions;
mod repo_limits;
mod report_index;
mod schedule_parse;
mod serve;
mod stored_run_check;
mod suite_anomaly;
mod synthetic_run;
mod workload_client_wire;
mod workload_view;
