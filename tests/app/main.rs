//! Integration tests: the real router over HTTP on loopback, a fresh database per test (a SQLite
//! file; a PostgreSQL database with `INCIDENTMIND_TEST_BACKEND=postgres`, see helpers.rs).
mod alertmanager;
mod chat;
mod chat_matrix;
mod cli;
mod consolidation;
mod embeddings;
mod evidence;
mod helpers;
mod injection;
mod insights;
mod instances;
mod investigation;
mod llm;
mod memory;
mod migrate_db;
mod openapi;
#[path = "../support/peer.rs"]
mod peer;
mod postmortem;
mod prometheus;
#[path = "../support/prometheus.rs"]
mod prometheus_real;
mod prometheus_stub;
mod proposals;
mod redaction;
mod schema;
mod service;
#[path = "../support/skip.rs"]
mod skip;
#[path = "../support/synapse.rs"]
mod synapse;
mod ui;
mod walkthrough;
mod web;
mod webhooks;
mod workflow;
