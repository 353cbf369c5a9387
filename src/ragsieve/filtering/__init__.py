"""filtering stage."""
