"""LeRobot's inference engines beside the loop: its asynchronous client and action queue (`async_client`, the gRPC
client; `async_policy`, simulated time; `async_wall`, wall time beside a paced arm; `async_connect`, which of the
two), and Real-Time Chunking (`rtc_policy`, simulated time; `rtc_wall`, wall time). The synchronous engine is
`policies.lerobot_policy` itself."""
