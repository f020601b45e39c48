mod cases;
mod hostile;
mod leases;
mod secrets;
mod snapshots;
mod support;
mod v41;
mod v46;
