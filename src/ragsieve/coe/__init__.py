"""coe stage."""
