//! Integration tests: the real router over HTTP on loopback, a fresh database per test (a SQLite
//! file; a PostgreSQL database with `INCIDENTMIND_TEST_BACKEND=postgres`, see helpers.rs).
mod accounts;
mod alertmanager;
mod changes;
mod chat;
mod chat_matrix;
mod cli;
mod conditional;
mod consolidation;
mod consolidation_import;
mod dead_end_approval;
mod embeddings;
mod evidence;
mod failure_modes;
mod helpers;
mod injection;
mod insights;
mod instances;
mod investigation;
mod learn_recall;
mod live;
mod llm;
mod llm_stream;
mod mcp;
mod memory;
mod migrate_db;
mod oidc;
#[path = "../support/oidc.rs"]
mod oidc_provider;
mod openapi;
mod paging;
#[path = "../support/peer.rs"]
mod peer;
mod postmortem;
mod prometheus;
mod prometheus_large;
#[path = "../support/prometheus.rs"]
mod prometheus_real;
mod prometheus_stub;
mod proposals;
mod pulled_rates;
mod reads_right;
mod recall_notes;
mod redaction;
mod schema;
mod service;
#[path = "../support/skip.rs"]
mod skip;
mod small_things;
mod stale_confirm;
#[path = "../support/synapse.rs"]
mod synapse;
mod ui;
mod versions;
mod walkthrough;
mod web;
mod webhook_groups;
mod webhooks;
mod workflow;
