"""MirrorMaker 2's formats and rules: its records byte for byte, which topic configs travel."""
