//! Application services: the workflow steps a handler calls. Each opens its own write
//! transaction, applies domain rules, writes the timeline and the audit log, and commits.

pub mod accounts;
pub mod chat;
pub mod consolidation;
pub mod evidence;
pub mod grading;
pub mod health;
pub mod identity;
pub mod incidents;
pub mod ingest;
pub mod insights;
pub mod investigation;
pub mod memory;
pub mod postmortem;
pub mod prometheus;
pub mod proposals;
pub mod questions;
pub mod review;
pub mod sample;
pub mod users;
pub mod workflow;
