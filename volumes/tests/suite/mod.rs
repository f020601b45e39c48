mod cases;
mod hostile;
mod leases;
mod snapshots;
mod support;
mod v41;
