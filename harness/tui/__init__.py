"""The operator's TUI: a Textual view over the same run engine the headless mode uses."""
