//! IncidentMind: an incident-response copilot with organizational memory.
//!
//! Layers (DESIGN.md §7): [`web`] (axum handlers, askama pages, JSON API) calls [`services`],
//! which apply the pure rules in [`domain`] and persist through [`store`] (the only module with
//! SQL). [`App::build`] wires them together (database, memory, model, router) for `serve`, the
//! CLI and the tests; [`cli`] is the command line; `main.rs` only calls it.

// No unsafe code but the few reasoned exceptions in `startup` (each with its SAFETY comment).
#![deny(unsafe_code)]

pub mod analyst;
pub mod app;
pub mod chat;
pub mod cli;
pub mod digest;
pub mod domain;
pub mod error;
pub mod evidence;
pub mod identity;
pub mod load;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub mod openai;
pub mod prometheus;
pub mod services;
pub mod startup;
pub mod store;
pub mod web;

pub use app::App;
pub use error::{AppError, AppResult};
pub use web::{AppState, Settings, router};
