//! Planning ahead: what can be decided before anything runs.
//!
//! # Design
//!
//! A model's schedule is known when it is prepared, and an eager workload's is known after
//! one measured run, so memory need not be searched for at run time:
//!
//! - [`arena`]: fixed offsets for buffers of known lifetimes (interval packing), so that a
//!   run places each tensor where the plan says ([`ComputeClient::place`](crate::client::ComputeClient::place))
//!   and an arena sized by the plan is exactly enough.

pub mod arena;

pub use arena::{lower_bound, plan, ArenaPlan, Lifetime, PlanError};
