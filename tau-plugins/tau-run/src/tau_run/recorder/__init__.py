"""The lifecycle recorder behind ``tau run history record`` (derive: rows; loop: watches and writes; health;
main: wiring)."""
