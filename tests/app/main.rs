//! Integration tests: the real router over HTTP on loopback, a fresh SQLite file per test.

mod embeddings;
mod evidence;
mod helpers;
mod investigation;
mod llm;
mod memory;
mod postmortem;
mod redaction;
mod web;
mod webhooks;
mod workflow;
