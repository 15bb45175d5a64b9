"""Statistics with no domain records: Wilson and Newcombe intervals and sample sizes (`estimates`), the sequential
success test and its design (`sequential`), the paired betting e-process for graded outcomes (`betting`),
twin-assisted rates (`ppi`) and the logistic fit (`logistic`). Pure NumPy; `harness.models` applies them."""
