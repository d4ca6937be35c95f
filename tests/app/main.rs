//! Integration tests: the real router over HTTP on loopback, a fresh SQLite file per test.
mod alertmanager;
mod cli;
mod embeddings;
mod evidence;
mod helpers;
mod insights;
mod investigation;
mod llm;
mod memory;
mod openapi;
mod postmortem;
mod redaction;
mod service;
mod ui;
mod web;
mod webhooks;
mod workflow;
