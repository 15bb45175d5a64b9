"""Pure data models: protocols, scoresheets, taxonomy, verdicts, run requests. No hardware, no simulator imports;
their statistics live in `harness.stats` and their durable files in `harness.storage`."""
