"""tasks stage."""
