"""One module per `harness` subcommand. Each has `register(sub)`: it adds its parser to the
subparsers and sets `func`, the handler `harness.cli.main` calls with the parsed arguments.
Handlers import their package lazily, so `harness --help` stays fast."""
