"""Offsets across clusters: the exact sync history of a flow and translation with it."""
