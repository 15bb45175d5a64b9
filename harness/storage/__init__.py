"""Durable files: atomic writes, the scoresheet's append-only journal and hash chain, the one-writer lock, the
progress witness in the user's state folder, and users' YAML read with limits. Knows bytes and files, not what a
protocol or a trial is (that is `harness.models`, which stores itself through these)."""
