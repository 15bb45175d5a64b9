"""The Feetech STS3215 bus: a wire-level emulator, a bus that re-locks EEPROM, and `fix-ids`."""
