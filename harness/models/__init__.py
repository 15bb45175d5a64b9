"""Pure data models: protocols, scoresheets, statistics. No hardware, no simulator imports."""
