//! One stage run (decide, execute, record) and its dry-run plan.

pub mod decide;
pub mod plan;
pub mod run;
