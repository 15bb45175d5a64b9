"""The composition layer: the one place that turns command-line arguments into robots, policies,
stages, engines and the TUI app, and wires them together through their constructors."""
