"""The Feetech STS3215 bus: its wire (framing, short-timeout requests, ports), a bus that re-locks EEPROM, and
`fix-ids`. What a real arm's bus needs and nothing more: the emulated arm that answers on it is `harness.emulator`."""
