"""Everything Ray: `harness run --workers N` (`runs`: the driver; `workers`: what a worker runs, and the Ray actors,
which a sweep keeps from cell to cell), the worker count `--workers auto` picks (`scaling`), the watchman that ends
a local Ray runtime's processes when the driver dies (`ray_reaper`), and LeRobot's policy server for a sweep's
`policy_server: local` cell (`local_policy_server`)."""
