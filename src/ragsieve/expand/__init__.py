"""expand stage."""
